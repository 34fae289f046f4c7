"""Command-line entry: ``python -m iquitos_lightning <command>``.

``fit``/``validate``/``test`` go to LightningCLI (``iquitos_lightning.cli``); ``build-site``,
``baselines`` and the other project commands are parsed here. With no command it runs the main
job on its embedded defaults (see :func:`run_default_job`), so a newcomer sees it work at once.
Imports are lazy: ``build-site`` must not pay for importing torch and Lightning.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

LIGHTNING_COMMANDS = ("fit", "validate", "test", "predict")
DEFAULT_SITE = Path("configs/site/iquitos-2026.yaml")


def _project_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m iquitos_lightning",
        description="Train and evaluate RL controllers of the Iquitos EV charging site. "
        f"Lightning commands: {', '.join(LIGHTNING_COMMANDS)} (see `fit --help`).",
    )
    commands = parser.add_subparsers(dest="command", metavar="command")

    build = commands.add_parser("build-site", help="write the CityLearn schema and CSVs of a site profile")
    build.add_argument("--site", type=Path, default=DEFAULT_SITE, help="site profile YAML (default: %(default)s)")
    build.add_argument("--out", type=Path, default=None, help="output folder (default: data/<site name>)")
    build.add_argument("--force", action="store_true", help="rebuild even if a build with the same hash exists")

    baselines = commands.add_parser("baselines", help="run the reference controllers and the LP optimum")
    baselines.add_argument("--site", type=Path, default=DEFAULT_SITE, help="site profile YAML (default: %(default)s)")
    baselines.add_argument("--results", type=Path, default=Path("results"), help="results root (default: %(default)s)")
    return parser


def run_default_job() -> int:
    """The main job on embedded defaults: build the default site and print the reference table."""
    from iquitos_lightning.control.baselines import run_baselines

    run_baselines(DEFAULT_SITE, Path("results"))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a :class:`~iquitos_lightning.errors.ProjectError` becomes ``error: ...`` and its exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in LIGHTNING_COMMANDS:
        from iquitos_lightning.cli import run_lightning_cli

        return run_lightning_cli(args)
    from iquitos_lightning.errors import ProjectError, one_line

    try:
        return _run_project_command(args)
    except ProjectError as error:
        print(f"error: {one_line(error)}", file=sys.stderr)
        return error.exit_code


def _run_project_command(args: list[str]) -> int:
    if not args:
        return run_default_job()

    namespace = _project_parser().parse_args(args)
    from iquitos_lightning.site.config import load_site_config

    site_config = load_site_config(namespace.site)

    if namespace.command == "build-site":
        from iquitos_lightning.site.build import build_site, print_calibration

        result = build_site(site_config, namespace.out, force=namespace.force)
        print_calibration(result)
        return 0
    if namespace.command == "baselines":
        from iquitos_lightning.control.baselines import run_baselines

        run_baselines(namespace.site, namespace.results)
        return 0
    raise AssertionError(f"unhandled command {namespace.command}")


if __name__ == "__main__":
    sys.exit(main())
