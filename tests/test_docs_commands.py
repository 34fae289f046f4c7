"""Every command the README and the reference docs show parses as written: a user copying one never meets an unknown
flag or a renamed option. ``fit``/``test`` lines go through the real LightningCLI parser (``--print_config``), the
project's commands through their own argument parsers. README.md keeps the shape of a product page."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from iquitos_lightning.__main__ import _project_parser
from iquitos_lightning.cli import run_lightning_cli

REPO = Path(__file__).resolve().parents[1]
COMMAND = re.compile(r"python -m iquitos_lightning\b([^`|\n]*)")
LIGHTNING_COMMANDS = ("fit", "test", "validate", "predict")
README_MAX_LINES = 150


def documented_commands() -> dict[str, str]:
    """Each distinct ``python -m iquitos_lightning ...`` argument string of README.md and docs/ (not the log), with
    the first file that shows it; a line ending in ``\\`` goes on on the next one, ``# ...`` comments go and an
    optional ``[--flag value]`` part is checked as if given."""
    found: dict[str, str] = {}
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        if doc.name == "experiments.md":  # the log keeps commands as they were run
            continue
        text = re.sub(r"\\\n\s*", " ", doc.read_text())
        for match in COMMAND.finditer(text):
            arguments = match.group(1).split("  #")[0].split(" # ")[0].strip()
            found.setdefault(re.sub(r"\s\[|\]", " ", arguments).strip(), doc.name)  # [optional parts] count too
    return found


def _flags(arguments: list[str]) -> list[str]:
    return [argument.split("=")[0] for argument in arguments if argument.startswith("--")]


def _help_text(main, argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(argv)
    return out.getvalue()


def test_the_readme_and_docs_show_the_project_commands() -> None:
    commands = documented_commands()
    assert len(commands) > 20
    shown = {shlex.split(arguments)[0] for arguments in commands if arguments}
    assert {"fit", "test", "compare", "baselines", "test-years", "bench", "gpu-check"} <= shown


@pytest.mark.parametrize("arguments", sorted(documented_commands()))
def test_every_documented_command_parses(arguments: str, capsys: pytest.CaptureFixture[str]) -> None:
    tokens = shlex.split(arguments)
    if not tokens or tokens == ["--help"]:
        return
    command, rest = tokens[0], tokens[1:]
    if command in LIGHTNING_COMMANDS:
        assert run_lightning_cli([command, *rest, "--print_config"]) == 0, capsys.readouterr().err[-2000:]
    elif command in ("bench", "gpu-check"):
        from benchmarks.bench.run import main as bench_main
        from benchmarks.gpu_check.run import main as gpu_check_main

        known = _help_text(bench_main if command == "bench" else gpu_check_main, ["--help"])
        assert [flag for flag in _flags(rest) if flag not in known] == [], arguments
    elif command == "benchmark":  # its own parser, after the benchmark's name
        from iquitos_lightning.experiments.citylearn_2022 import build_parser

        assert rest[:1] == ["citylearn-2022"], arguments
        build_parser().parse_args(rest[1:])
    elif command == ".experiments.citylearn_2022_agents":  # the agents on the benchmark: a module of its own
        from iquitos_lightning.experiments.citylearn_2022_agents import build_parser

        build_parser().parse_args(rest)
    else:
        _project_parser().parse_args(tokens)  # an unknown flag or a bad value exits with argparse's message


def test_the_readme_is_a_product_page() -> None:
    """At most 150 lines, the card table on the first screen, a figure, the two set-up commands, the results page."""
    readme = (REPO / "README.md").read_text()
    lines = readme.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: results go to results/, history to docs"
    first_screen = "\n".join(lines[:70])
    assert "| `sac_cpu` |" in first_screen and "![" in first_screen
    assert "bash scripts/install.sh && .venv/bin/python -m pytest -q" in readme
    assert "results/iquitos-2026/README.md" in readme
