"""Issue 17 item 8: every command of the README runs, and the values it shows are the ones printed.

Commands are found in the README itself (bash blocks and inline ``epscert ...`` / ``python -m ...``
spans), so a command added to the README without a place here fails
:func:`test_every_readme_command_is_classified`. Fast ones run by default, slow ones are marked.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PROSE = re.sub(r"```.*?```", "", README, flags=re.S).replace("\n", " ")

#: Commands the tests here run in process (fast), as the README writes them.
FAST = ("epscert certify --help", "epscert sweep --help",
        "epscert fft --schedule schedule.json --epsilons 1,2 --half-width 8 --size 262144",
        "epscert hidden-state --dataset-size 60000 --batch-size 600 --epochs 1,10,50 --step-size 0.5 "
        "--sigma 0.005 --strong-convexity 0.01 --smoothness 0.26 --grad-sensitivity 2",
        "epscert epsilon --dataset-size 60000 --batch-size 256 --epochs 10 --noise-multiplier 1.0 --delta 1e-5")
#: Commands run only with -m slow (minutes).
SLOW = ("epscert compare --sigma 0.35 --steps 1000 --epsilons 1,2,4,8 --deltas 1e-3,1e-5 --samples 200000",
        "python -m benchmarks.method_table", "python -m benchmarks.calibration",
        "python -m benchmarks.fft_vs_dp_accounting", "python -m benchmarks.run", "python -m benchmarks.parallel",
        "python -m benchmarks.allocation",
        "python -m benchmarks.conditional", "python -m benchmarks.conditional_epochs", "python -m benchmarks.midepoch",
        "python -m benchmarks.readme_figures")
#: The BandMF section's commands (issue 23), run only with -m slow (tens of CPU seconds).
MATRIX = ("epscert epsilon --c-col 1,0.5,0.375,0.3125 --iterations 200 --cycle-length 10 --noise-multiplier 3 "
          "--delta 1e-6 --samples 10000",
          "epscert certify --c-col 1,0.5,0.375,0.3125 --iterations 200 --cycle-length 10 --sigma 3 --epsilons 6,8 "
          "--samples 10000 --output bandmf.parquet")
#: Not run here: installs and the test suite itself (tests/test_readme.py ties them to CI), the main
#: certify command (tests/test_readme.py runs it at a test-sized budget), templates with placeholders.
ELSEWHERE = ("pip ", "python -m pytest")


def readme_commands() -> list[str]:
    bash = [line.strip() for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S)
            for line in block.splitlines() if line.strip() and not line.strip().startswith("#")]
    inline = [m for m in re.findall(r"`([^`]+)`", PROSE) if m.startswith(("epscert ", "python -m "))]
    return bash + inline


def is_template(command: str) -> bool:
    """A name or a template: no flag at all, '...', or an upper-case placeholder (SPEC, DIR)."""
    words = command.split()
    return "--" not in command or "..." in command or any(w.isupper() and w.isalpha() for w in words)


def test_every_readme_command_is_classified():
    for command in readme_commands():
        command = " ".join(command.split())
        runnable = not is_template(command) and not command.startswith(ELSEWHERE)
        if runnable and "&&" not in command:
            assert command in FAST + SLOW + MATRIX, f"README command not run by any test: {command!r}"
    assert set(FAST + SLOW + MATRIX) <= {" ".join(c.split()) for c in readme_commands()}, \
        "a listed command left the README"


def run_cli(command: str, capsys) -> str:
    from pipelines import cli  # noqa: PLC0415

    argv = shlex.split(command)
    assert argv[0] == "epscert"
    assert cli.main(argv[1:]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


@pytest.mark.parametrize("command", [c for c in FAST if c.endswith("--help")])
def test_help_commands(command, capsys):
    from pipelines import cli  # noqa: PLC0415

    with pytest.raises(SystemExit) as exit_:
        cli.main(shlex.split(command)[1:])
    assert exit_.value.code == 0 and "usage:" in capsys.readouterr().out


def test_fft_command_with_the_readme_schedule(tmp_path, monkeypatch, capsys):
    schedule = re.search(r"where the schedule is `(\{.*?\})`", PROSE).group(1)
    (tmp_path / "schedule.json").write_text(json.dumps(json.loads(schedule)))
    monkeypatch.chdir(tmp_path)
    out = run_cli(FAST[2], capsys)
    assert "| both | 1 |" in out and "nan" not in out


def test_hidden_state_command_matches_the_readme_snippet(capsys):
    out = run_cli(FAST[3], capsys)
    # README's Python snippet: "1.016 vs 13.130" at K = 50 epochs (same configuration)
    line = next(line for line in out.splitlines() if line.startswith("| 50 |"))
    hidden, composition = (float(x) for x in line.split("|")[3:5])
    assert round(hidden, 3) == 1.016 and round(composition, 2) == 13.13


def test_epsilon_command_answers_the_lead_question(capsys):
    out = run_cli(FAST[4], capsys).splitlines()
    # the Balls-and-Bins PLD bracket answers, below Poisson's PLD ε and above its own lower side
    upper = float(re.search(r"<= ([0-9.]+)", out[0]).group(1))
    poisson = float(re.search(r"Poisson ε <= ([0-9.]+)", out[1]).group(1))
    lower = float(re.search(r"Balls-and-Bins ε >= ([0-9.]+)", out[1]).group(1))
    assert "allocation_bracket_upper" in out[0] and lower <= upper < poisson
    assert f"{upper:.3f}" in README and f"{poisson:.3f}" in README  # the README's lead table shows them


def _numbers(text: str) -> list[str]:
    return re.findall(r"(?<![\w.])\d+\.\d+(?:e[-+]?\d+)?", text)


def test_python_snippets_print_the_values_in_their_comments():
    """Each `print(...)  # values` line of a README snippet prints those values (to the digits shown)."""
    for code in re.findall(r"```python\n(.*?)```", README, flags=re.S):
        expected = [n for line in code.splitlines() if line.lstrip().startswith("print(") and "#" in line
                    for n in _numbers(re.sub(r"=\s*\S+", "", line.split("#", 1)[1]))]  # '= x': a parameter
        if not expected:
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})
        printed = [float(x) for x in _numbers(out.getvalue())]
        for text in expected:
            digits = len(text.split("e")[0].replace(".", "").lstrip("0"))
            value = float(text)
            assert any(float(f"{p:.{digits}g}") == pytest.approx(value, rel=1e-12) for p in printed), \
                f"README says {text}, printed {out.getvalue()!r}"


def test_stderr_carries_only_epscert_lines():
    """No Beam apitools warning, no absl convergence spam (q = 0.5 compare), no traceback."""
    commands = [["--help"],
                ["certify", "--sigma", "1", "--steps", "4", "--samples", "200", "--no-baselines", "--no-progress"],
                ["compare", "--sigma", "1", "--steps", "2", "--epsilons", "1", "--samples", "200", "--no-fft"]]
    for argv in commands:
        proc = subprocess.run([sys.executable, "-m", "pipelines.cli", *argv], cwd=ROOT, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        foreign = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("epscert")]
        assert not foreign, foreign


@pytest.mark.slow
def test_compare_command_prints_the_readme_table(capsys):
    """The analytic columns of the README's compare table are reproduced to the digits shown."""
    out = run_cli(SLOW[0], capsys)
    lines = [line.split() for line in out.splitlines()[1:]]
    header = re.findall(r"δ_[A-Z] [A-Za-z ]+?(?=\s{2,}|$)", out.splitlines()[1])
    readme = re.search(r"\| quantity \|(.*?)\n\n", README, flags=re.S).group(0).strip().splitlines()
    names = [c.strip() for c in readme[0].strip("|").split("|")][1:]
    assert names[:len(header)] == header
    analytic = [i for i, n in enumerate(names) if "MC" not in n and "UCB" not in n]
    ours = {_label(r[0]): r[1:] for r in lines[1:]}
    for row in readme[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        got = ours[_label(cells[0])]
        for i in analytic:
            if cells[i + 1] != "-":
                assert got[i] == cells[i + 1] or float(got[i]) == pytest.approx(float(cells[i + 1]), rel=1e-3), \
                    (cells[0], names[i])


def _label(text: str) -> tuple[str, float]:
    kind, value = text.split("=")
    return kind, float(value.split()[0])


@pytest.mark.slow
@pytest.mark.parametrize("command", SLOW[1:])
def test_benchmark_commands_run(command, tmp_path):
    extra = ["--out", str(tmp_path)] if command.endswith("readme_figures") else []  # not over the README's PNGs
    proc = subprocess.run([sys.executable, *shlex.split(command)[1:], *extra], cwd=ROOT, capture_output=True,
                          text=True, timeout=3600)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]


@pytest.mark.slow
def test_bandmf_commands_print_the_readme_answer(tmp_path, monkeypatch, capsys):
    """The BandMF section's epsilon output block is what the command prints; its certify command runs."""
    out = run_cli(MATRIX[0], capsys)
    block = README.split(MATRIX[0], 1)[1].split("```\n```\n", 1)[1].split("```", 1)[0]
    assert out.strip() == block.strip()
    monkeypatch.chdir(tmp_path)
    assert "comonotone_upper_bound" in run_cli(MATRIX[1], capsys)
    assert (tmp_path / "bandmf.parquet").exists()
