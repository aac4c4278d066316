"""The README's commands and snippets are executed, so the docs cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_readme_python_snippets_run(capsys):
    snippets = _blocks("python")
    assert snippets, "the README has no Python snippet"
    for code in snippets:
        code = code.replace("samples=100_000", "samples=2_000")  # same code path, test-sized budget
        exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "importance" in out and "cube_lower_bound" in out


def test_ci_runs_the_readme_test_command():
    commands = [line.strip() for block in _blocks("bash") for line in block.splitlines()
                if line.strip() and not line.strip().startswith("#")]
    assert len(commands) >= 2, commands
    test_command = commands[1]
    assert "pytest" in test_command
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_command in ci, f"CI must run the README's test command: {test_command!r}"
