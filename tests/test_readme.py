"""The README's commands and snippets are executed, so the docs cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def two_commands() -> list[str]:
    """The commands of the README's "Two commands" section: the main job, then the tests."""
    section = README.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    return [line.strip() for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S)
            for line in block.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_readme_python_snippets_run(capsys):
    snippets = _blocks("python")
    assert snippets, "the README has no Python snippet"
    for code in snippets:
        code = code.replace("samples=100_000", "samples=2_000")  # same code path, test-sized budget
        exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "importance" in out and "cube_lower_bound" in out


def test_ci_runs_the_readme_test_command():
    commands = two_commands()
    assert len(commands) >= 2, commands
    test_command = commands[1]
    assert "pytest" in test_command
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_command in ci, f"CI must run the README's test command: {test_command!r}"


def test_readme_sweep_spec_parses(tmp_path):
    from pipelines.spec import load  # noqa: PLC0415 (Beam import only for this test)

    blocks = _blocks("yaml")
    assert blocks, "the README has no sweep spec"
    for text in blocks:
        path = tmp_path / "sweep.yaml"
        path.write_text(text)
        configs = load(str(path))
        assert len(configs) >= 1


def test_readme_main_command_runs(tmp_path, capsys):
    import shlex  # noqa: PLC0415

    import pyarrow.parquet as pq  # noqa: PLC0415

    from pipelines import cli  # noqa: PLC0415

    commands = two_commands()
    main_command = commands[0].split("&&", 1)[1]
    argv = shlex.split(main_command)
    assert argv[0] == "epscert" and argv[1] == "certify"
    argv = argv[1:]
    argv[argv.index("--samples") + 1] = "2000"  # the same job, test-sized
    argv[argv.index("--output") + 1] = str(tmp_path / "results.parquet")
    assert cli.main(argv + ["--no-progress"]) == 0
    table = pq.read_table(tmp_path / "results.parquet")
    assert {"importance", "cube_lower_bound", "pld_upper", "exact"} <= set(table.column("method").to_pylist())
    assert "mc_upper_confidence" in capsys.readouterr().out


#: A markdown link or image target: ](target) or ](target "title").
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def relative_links(text: str) -> list[str]:
    """The link targets of ``text`` that name a file of the repository (no URL, no bare anchor)."""
    targets = [t.split("#", 1)[0] for t in LINK.findall(text)]
    return [t for t in targets if t and not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def test_every_relative_link_works_from_a_clone():
    # issue 35: the README linked ../shared/SPEC.md, which a clone does not have
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    checked, broken = 0, []
    for page in pages:
        for target in relative_links(page.read_text()):
            path = (page.parent / target).resolve()
            checked += 1
            if not path.is_relative_to(ROOT) or not path.exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken
    assert checked >= 5  # the README's figures and docs pages at least: the pattern does find links


def test_link_pattern_finds_links_and_skips_urls():
    text = '[a](docs/spec.md#x) ![f](fig.png "t") [u](https://example.org) [h](#anchor) [m](mailto:x@y)'
    assert relative_links(text) == ["docs/spec.md", "fig.png"]
