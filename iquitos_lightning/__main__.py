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
from typing import TYPE_CHECKING

from iquitos_lightning import process_exit

if TYPE_CHECKING:
    from iquitos_lightning.experiments.launchers import LauncherOptions

LIGHTNING_COMMANDS = ("fit", "validate", "test", "predict")
LIGHTNING_COMMAND_HELP = {
    "fit": "train an agent: fit --config configs/sac_cpu.yaml (resume: --ckpt_path last; fresh: --run.new)",
    "validate": "evaluate a checkpoint on the validation episodes (--ckpt_path)",
    "test": "evaluate a checkpoint and write its KPI row and report (--ckpt_path)",
    "predict": "Lightning's predict loop: the agents define no predict_step, so it refuses",
}
MAIN_JOB = (
    "build the default site, print its calibration and the reference table, then train SAC briefly on the "
    "tiny site and test it (about a minute on a CPU)"
)
DEFAULT_SITE = Path("configs/site/iquitos-2026.yaml")
SMOKE_CONFIG = Path("configs/smoke.yaml")


def _project_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m iquitos_lightning",
        description="Train and evaluate RL controllers of the Iquitos EV charging site. "
        f"With no command it runs the main job: {MAIN_JOB}.",
        epilog="Each command has its own --help (e.g. `python -m iquitos_lightning fit --help`).",
    )
    commands = parser.add_subparsers(dest="command", metavar="command")
    # Listed for --help only: main() hands these to LightningCLI (iquitos_lightning/cli.py) before parsing.
    for command, does in LIGHTNING_COMMAND_HELP.items():
        commands.add_parser(command, help=does)

    build = commands.add_parser("build-site", help="write the CityLearn schema and CSVs of a site profile")
    build.add_argument("--site", type=Path, default=DEFAULT_SITE, help="site profile YAML (default: %(default)s)")
    build.add_argument("--out", type=Path, default=None, help="output folder (default: data/<site name>)")
    build.add_argument("--force", action="store_true", help="rebuild even if a build with the same hash exists")

    baselines = commands.add_parser("baselines", help="run the reference controllers and the LP optimum")
    baselines.add_argument("--site", type=Path, default=DEFAULT_SITE, help="site profile YAML (default: %(default)s)")
    baselines.add_argument("--results", type=Path, default=Path("results"), help="results root (default: %(default)s)")
    baselines.add_argument(
        "--simulator",
        choices=("citylearn", "twin"),
        default="citylearn",
        help="run the references on CityLearn or its bit-equal twin (same numbers, faster; default: %(default)s)",
    )
    # Listed for --help only: main() hands `bench ...` to benchmarks.bench.run before parsing.
    commands.add_parser("bench", help="speed and memory report, ours vs Stable-Baselines3 (see `bench --help`)")
    commands.add_parser(
        "benchmark",
        help="citylearn-2022: the published protocol on CityLearn's 2022 data, beside its table (see --help there)",
    )
    commands.add_parser(
        "gpu-check", help="measure every CUDA path: profiles under an 8 GiB cap, update step, OOM drill (--help)"
    )

    compare = commands.add_parser(
        "compare", help="train agents over seeds, evaluate on the full year, tabulate against the references"
    )
    compare.add_argument("--site", type=Path, default=DEFAULT_SITE, help="site profile YAML (default: %(default)s)")
    compare.add_argument(
        "--agents",
        default="sac,ppo,a2c",
        help="agents or variants (ppo_fleet: ppo_fleet_<profile>.yaml), comma-separated (default: %(default)s)",
    )
    compare.add_argument("--seeds", type=int, default=3, help="seeds per agent: 0..N-1 (default: %(default)s)")
    compare.add_argument(
        "--frames",
        required=True,
        help="training frames per run, rounded up to whole rollouts: N, or per agent sac=N,ppo=N,a2c=N",
    )
    compare.add_argument(
        "--profile",
        default="cpu",
        help="training profile: <agent>_<profile>.yaml in configs/, else configs/experiments/*/ (default: %(default)s)",
    )
    _add_launcher_arguments(compare)
    compare.add_argument(
        "--evaluations",
        type=int,
        default=1,
        help="evaluations per run, evenly spaced, the last at the end: the learning curves (default: %(default)s)",
    )
    compare.add_argument(
        "--restarts",
        type=int,
        default=1,
        help="training runs per reported seed, the best on the selection year reported (needs one; default: 1)",
    )
    compare.add_argument(
        "--test-years",
        default="",
        help="site seeds to test every reference and each run's best.ckpt on at the end, e.g. 2040,2041,2042,2043,2044"
        " (test-years; default: none)",
    )
    compare.add_argument("--results", type=Path, default=Path("results"), help="results root (default: %(default)s)")
    compare.add_argument("--runs", type=Path, default=Path("runs/compare"), help="runs root (default: %(default)s)")
    compare.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="[AGENT:]KEY=VALUE",
        help="extra fit override, for every run or one agent's, e.g. ppo:model.init_args.epochs=4 (repeatable)",
    )
    _add_tune_parser(commands)
    reference = commands.add_parser(
        "tune-reference", help="tune the practitioner's MPC (mpc_robust) on the training years with Optuna"
    )
    reference.add_argument("--site", type=Path, default=DEFAULT_SITE, help="site profile YAML (default: %(default)s)")
    reference.add_argument("--trials", type=int, default=8, help="trials the study holds when done (default: 8)")
    reference.add_argument(
        "--years",
        default="2030,2031,2032,2033",
        help="site seeds to tune on (default: the training years)",
    )
    reference.add_argument("--seed", type=int, default=0, help="TPE sampler seed (default: %(default)s)")
    reference.add_argument("--results", type=Path, default=Path("results"), help="results root (default: %(default)s)")
    reference.add_argument(
        "--runs", type=Path, default=Path("runs/tune-reference"), help="study journal folder (default: %(default)s)"
    )
    reference.add_argument(
        "--out",
        type=Path,
        default=Path("configs/tuned/mpc_robust_tariff.yaml"),
        help="tuned knobs YAML",
    )
    years = commands.add_parser(
        "test-years", help="every reference and each compare run's best.ckpt on test years: the reviewers' table"
    )
    years.add_argument("--site", type=Path, default=DEFAULT_SITE, help="site profile YAML (default: %(default)s)")
    years.add_argument(
        "--agents", default="sac,ppo,a2c", help="agents whose compare runs to test (default: %(default)s)"
    )
    years.add_argument("--years", default="2040,2041,2042,2043,2044", help="test site seeds (default: %(default)s)")
    years.add_argument(
        "--runs", type=Path, default=Path("runs/compare"), help="compare's runs root (default: %(default)s)"
    )
    years.add_argument("--results", type=Path, default=Path("results"), help="results root (default: %(default)s)")
    return parser


def _add_tune_parser(commands: argparse._SubParsersAction) -> None:
    tune = commands.add_parser(
        "tune", help="Optuna search over a profile's hyperparameters (search space: configs/search/*.yaml)"
    )
    tune.add_argument(
        "--search",
        type=Path,
        default=Path("configs/search/sac_residual_tariff.yaml"),
        help="search-space YAML naming its profile (default: %(default)s)",
    )
    tune.add_argument("--site", type=Path, default=DEFAULT_SITE, help="site profile YAML (default: %(default)s)")
    tune.add_argument("--trials", type=int, default=20, help="trials the study holds when done (default: %(default)s)")
    tune.add_argument("--frames", type=int, required=True, help="training frames per trial (whole rollouts)")
    tune.add_argument(
        "--evaluations", type=int, default=4, help="evaluations per trial: what the pruner sees (default: %(default)s)"
    )
    tune.add_argument("--study", default=None, help="study name (default: <search>-<site>)")
    tune.add_argument(
        "--storage",
        default=None,
        help="journal file path, or an RDB URL (postgresql://...) on a cluster (default: <runs>/<study>/study.journal)",
    )
    tune.add_argument("--runs", type=Path, default=Path("runs/tune"), help="trial runs root (default: %(default)s)")
    tune.add_argument(
        "--out", type=Path, default=Path("configs/tuned"), help="tuned YAML folder (default: %(default)s)"
    )
    tune.add_argument("--results", type=Path, default=Path("results"), help="results root (default: %(default)s)")
    tune.add_argument("--seed", type=int, default=0, help="training seed of every trial and TPE's seed (default: 0)")
    tune.add_argument("--pruner", choices=("median", "none"), default="median", help="(default: %(default)s)")
    tune.add_argument(
        "--startup-trials", type=int, default=2, help="trials finished before pruning starts (default: %(default)s)"
    )
    tune.add_argument(
        "--final-eval",
        choices=("citylearn", "none"),
        default="citylearn",
        help="evaluate the best trial's checkpoint on CityLearn at the end (default: %(default)s)",
    )
    tune.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="extra fit override for every trial"
    )
    _add_launcher_arguments(tune)


def _add_launcher_arguments(parser: argparse.ArgumentParser) -> None:
    """Where runs execute (experiments/launchers.py), shared by ``compare`` and ``tune``."""
    parser.add_argument("--jobs", type=int, default=1, help="runs trained at once (default: %(default)s)")
    parser.add_argument(
        "--launcher",
        choices=("local", "ray"),
        default="local",
        help="local: subprocesses on this machine; ray: Ray tasks on a cluster (docs/scale-out.md) (default: local)",
    )
    parser.add_argument(
        "--address",
        default=None,
        help="with --launcher ray: HOST:PORT of a running Ray head, or 'auto' (default: start Ray for this command)",
    )
    parser.add_argument(
        "--cpus-per-run", type=int, default=None, help="CPU cores (and torch threads) per run (default: cores / jobs)"
    )
    parser.add_argument(
        "--gpus-per-run", type=float, default=0.0, help="with --launcher ray: GPU share per run, e.g. 0.25 (default: 0)"
    )


def _launcher_options(namespace: argparse.Namespace) -> LauncherOptions:
    # lazy: each command loads only what it runs (build-site must not pay for torch and Lightning)
    from iquitos_lightning.experiments.launchers import LauncherOptions

    return LauncherOptions(
        namespace.launcher, namespace.jobs, namespace.cpus_per_run, namespace.gpus_per_run, namespace.address
    )


def run_default_job() -> int:
    """The main job on embedded defaults, about a minute on a laptop CPU.

    Builds the default site (cached) and prints its calibration and the committed reference table,
    then trains SAC briefly on the tiny site profile (``configs/smoke.yaml``) and tests it: a
    newcomer sees every stage of the product run, ending with the run's report folder. Full-site
    training is ``fit --config configs/sac_cpu.yaml`` (or ``sac_rtx4060.yaml`` on the laptop GPU).
    """
    # lazy: each command loads only what it runs (build-site must not pay for torch and Lightning)
    from iquitos_lightning.cli import run_lightning_cli
    from iquitos_lightning.console import command_console
    from iquitos_lightning.site.build import build_site, print_calibration
    from iquitos_lightning.site.config import load_site_config

    console = command_console()
    site_config = load_site_config(DEFAULT_SITE)
    print_calibration(build_site(site_config), console)
    references = Path("results") / site_config.name / "baselines.md"
    if references.exists():
        console.print(f"[bold]Reference controllers[/] ({references}):")
        console.print(references.read_text(), markup=False, soft_wrap=True)
    else:
        console.print(f"No reference table yet: `python -m iquitos_lightning baselines --site {DEFAULT_SITE}`")

    console.print(f"[bold]Training SAC on the tiny site[/] ({SMOKE_CONFIG}) ...")
    # --run.new: a second main job moves the first one's runs/smoke aside instead of being refused.
    if code := run_lightning_cli(["fit", "--config", str(SMOKE_CONFIG), "--run.new"]):
        return code
    checkpoint = "runs/smoke/checkpoints/last.ckpt"
    if code := run_lightning_cli(["test", "--config", str(SMOKE_CONFIG), "--ckpt_path", checkpoint]):
        return code
    console.print(
        "[bold green]Done.[/] The run's report: runs/smoke/report/ (summary.md, KPIs, learning curve, dispatch week); "
        "its W&B run (offline): runs/smoke/wandb/. Next: `python -m iquitos_lightning fit --config "
        "configs/sac_cpu.yaml` trains on the full Iquitos site."
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a :class:`~iquitos_lightning.errors.ProjectError` becomes ``error: ...`` and its exit status.

    Without ``argv`` it is the process's own command line (``python -m iquitos_lightning``, the ``iquitos-lightning``
    script): the process then ends without Python's teardown once the command returns (:mod:`~iquitos_lightning.
    process_exit`: ~3 s of CPU a process)."""
    if argv is not None:
        return _run_command(list(argv))
    process_exit.skip_teardown()
    try:
        code = _run_command(sys.argv[1:])
    except SystemExit as stop:  # argparse's and jsonargparse's --help and usage errors
        if stop.code is None or isinstance(stop.code, int):
            process_exit.record_status(stop.code or 0)
        raise
    process_exit.record_status(code)
    return code


def _run_command(args: list[str]) -> int:
    if args and args[0] in LIGHTNING_COMMANDS:
        # lazy: each command loads only what it runs (build-site must not pay for torch and Lightning)
        from iquitos_lightning.cli import run_lightning_cli

        return run_lightning_cli(args)
    # lazy: each command loads only what it runs (build-site must not pay for torch and Lightning)
    from iquitos_lightning.errors import ProjectError, one_line

    try:
        return _run_project_command(args)
    except ProjectError as error:
        print(f"error: {one_line(error)}", file=sys.stderr)
        return error.exit_code


def _run_project_command(args: list[str]) -> int:
    if not args:
        return run_default_job()
    if args[0] == "bench":  # speed and memory report (benchmarks/bench/, docs/performance.md)
        # lazy: the instruments (benchmarks/, beside the package) load only for the commands that run them
        from benchmarks.bench.run import main as bench_main
        from iquitos_lightning.training.quiet import quiet_library_noise

        quiet_library_noise("--verbose" in args)  # the bench's fits printed the litlogger tip and LeafSpec per run
        return bench_main([arg for arg in args[1:] if arg != "--verbose"])
    if args[0] == "benchmark":  # a published protocol on someone else's data (experiments/citylearn_2022.py)
        # lazy: each command loads only what it runs
        from iquitos_lightning.experiments.citylearn_2022 import main as benchmark_main

        return benchmark_main(args[1:])
    if args[0] == "gpu-check":  # the GPU proof (benchmarks/gpu_check/, docs/performance.md)
        # lazy: the instruments (benchmarks/, beside the package) load only for the commands that run them
        from benchmarks.gpu_check.run import main as gpu_check_main

        return gpu_check_main(args[1:])

    namespace = _project_parser().parse_args(args)
    # lazy: each command loads only what it runs (build-site must not pay for torch and Lightning)
    from iquitos_lightning.site.config import load_site_config

    site_config = load_site_config(namespace.site)

    if namespace.command == "build-site":
        # lazy: each command loads only what it runs (build-site must not pay for torch and Lightning)
        from iquitos_lightning.site.build import build_site, print_calibration
        from iquitos_lightning.site.config import section_sources

        result = build_site(site_config, namespace.out, force=namespace.force)
        print_calibration(result, sources=section_sources(namespace.site))
        return 0
    if namespace.command == "compare":
        # lazy: each command loads only what it runs (build-site must not pay for torch and Lightning)
        from iquitos_lightning.experiments.compare import CompareError, parse_frames, run_compare

        agents = [agent.strip() for agent in namespace.agents.split(",") if agent.strip()]
        try:
            run_compare(
                namespace.site,
                agents,
                namespace.seeds,
                parse_frames(namespace.frames, agents),
                namespace.profile,
                namespace.results,
                namespace.runs,
                _launcher_options(namespace),
                namespace.override,
                args,
                evaluations=namespace.evaluations,
                restarts=namespace.restarts,
                test_years=tuple(int(year) for year in namespace.test_years.split(",") if year.strip()),
            )
        except CompareError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        return 0
    if namespace.command == "tune":
        # lazy: each command loads only what it runs (optuna only for `tune`)
        from iquitos_lightning.experiments.compare import CompareError
        from iquitos_lightning.experiments.tune import TuneSettings, run_tune

        settings = TuneSettings(
            search=namespace.search,
            site=namespace.site,
            trials=namespace.trials,
            frames=namespace.frames,
            evaluations=namespace.evaluations,
            study=namespace.study,
            storage=namespace.storage,
            runs=namespace.runs,
            out=namespace.out,
            results=namespace.results,
            seed=namespace.seed,
            pruner=namespace.pruner,
            startup_trials=namespace.startup_trials,
            final_eval=namespace.final_eval,
            overrides=tuple(namespace.override),
        )
        try:
            return run_tune(settings, _launcher_options(namespace))
        except CompareError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    if namespace.command == "tune-reference":
        # lazy: optuna only for this command
        from iquitos_lightning.errors import ConfigError
        from iquitos_lightning.experiments.tune_reference import ReferenceTuneSettings, run_tune_reference

        try:
            years = tuple(int(year) for year in namespace.years.split(",") if year.strip())
            settings = ReferenceTuneSettings(
                site=namespace.site,
                trials=namespace.trials,
                years=years,
                seed=namespace.seed,
                runs=namespace.runs,
                results=namespace.results,
                out=namespace.out,
                command=args,
            )
            run_tune_reference(settings)
        except (ConfigError, ValueError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        return 0
    if namespace.command == "test-years":
        # lazy: each command loads only what it runs
        from iquitos_lightning.errors import ConfigError
        from iquitos_lightning.experiments.unseen_years import run_test_years

        try:
            run_test_years(
                namespace.site,
                [agent.strip() for agent in namespace.agents.split(",") if agent.strip()],
                tuple(int(year) for year in namespace.years.split(",") if year.strip()),
                namespace.runs,
                namespace.results,
                args,
            )
        except (ConfigError, ValueError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        return 0
    if namespace.command == "baselines":
        # lazy: each command loads only what it runs (build-site must not pay for torch and Lightning)
        from iquitos_lightning.experiments.baselines import run_baselines

        run_baselines(namespace.site, namespace.results, simulator=namespace.simulator, command=args)
        return 0
    raise AssertionError(f"unhandled command {namespace.command}")


if __name__ == "__main__":
    sys.exit(main())
