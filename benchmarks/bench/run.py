"""``python -m iquitos_lightning bench``: every measurement in one run, printed as one Markdown report.

Default sizes fit in under 10 minutes on a 2-core machine; ``--quick`` shrinks everything to the
tiny site and a few frames (what the test runs). The learner section (ours vs plain PyTorch loops on
the twin, issue 31) and the fused section (the compiled training twin against the eager one, a compile per size) run
only when asked for: ``--sections learner fused``. Torch gets ``--threads`` threads (1 by default,
both sides of every comparison alike: small networks gain nothing from more on a busy 2-core box).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from benchmarks.bench.settings import DEFAULT_SETTINGS, AlgorithmSettings, OurArchitecture

SITE_128 = "configs/site/iquitos-2026.yaml"
SITE_38 = "configs/site/iquitos-38.yaml"
SITE_TINY = "configs/site/tiny.yaml"
SECTIONS = ("env", "training", "memory", "workers", "learner", "fused")  # what --sections accepts


@dataclass
class BenchConfig:
    """Sizes of every measurement (defaults: the full bench)."""

    env_sites: tuple[str, ...] = (SITE_128, SITE_38)
    env_steps: int = 50  # steps per layer per round
    env_rounds: int = 3
    twin_site: str = SITE_128  # the training twin's frames/s against num_envs (part of the env section)
    twin_sizes: tuple[int, ...] = (64, 256, 1024, 4096)
    twin_seconds: float = 2.0  # timed collection per size (after one untimed rollout)
    twin_years: bool = True  # the card's four training years (the tiny site of --quick has none built)
    training_site: str = SITE_38
    algorithms: tuple[str, ...] = ("SAC", "PPO", "A2C")
    training_rounds: int = 2
    frame_scale: float = 1.0  # multiplies every algorithm's measured frames
    num_workers: int | None = None  # our collection workers in the training comparison (None: our_architecture)
    overlap: bool | None = None  # SAC collects one rollout ahead (None: our_architecture)
    compile: bool | None = None  # our update step torch.compile'd (None: our_architecture)
    memory_site: str = SITE_TINY
    capacities: tuple[int, ...] = (10_000, 100_000, 1_000_000)
    storages: tuple[str, ...] = ("memory", "memmap")
    memory_frames: int = 100
    workers_site: str = SITE_38
    worker_counts: tuple[int, ...] = field(default_factory=lambda: tuple(range(1, (os.cpu_count() or 1) + 1)))
    worker_frames: int = 40
    worker_rounds: int = 3
    learner_site: str = SITE_128  # the experiment profiles' site
    learner_rounds: int = 2
    learner_quick: bool = False  # a few small rollouts per algorithm instead of the profiles' sizes
    fused_adam: bool = False  # the learner section's ours steps Adam's fused kernel (speed.fused_adam)
    fit_sizes: tuple[int, ...] = (64, 256, 1024)  # the card's PPO fit at these num_envs (bench/fit_scaling.py)
    fused_site: str = SITE_128  # the fused (compiled) training twin against the eager one (bench/fused_twin.py)
    fused_sizes: tuple[int, ...] = (64, 256, 1024, 4096)
    fused_seconds: float = 2.0  # each side's timed window per round (after its untimed first rollout)
    fused_rounds: int = 2
    fused_years: bool = True  # the card's four training years (the tiny site of --quick has none built)
    data_root: str = "data"
    threads: int = 1
    sections: tuple[str, ...] = ("env", "training", "memory", "workers")  # "learner", "fused" only when asked for

    @classmethod
    def quick(cls) -> BenchConfig:
        """Everything on the tiny site with a handful of frames: proves the code runs, measures nothing."""
        return cls(
            env_sites=(SITE_TINY,),
            env_steps=5,
            env_rounds=1,
            twin_site=SITE_TINY,
            twin_sizes=(4, 16),
            twin_seconds=0.2,
            twin_years=False,
            training_site=SITE_TINY,
            training_rounds=1,
            frame_scale=0.1,
            memory_site=SITE_TINY,
            capacities=(1_000, 2_000),
            storages=("memmap",),
            memory_frames=40,
            workers_site=SITE_TINY,
            worker_counts=(1, 2),
            worker_frames=5,
            worker_rounds=1,
            learner_site=SITE_TINY,
            learner_rounds=1,
            learner_quick=True,
            fit_sizes=(),  # a fit per size of the card's site: minutes, not a smoke run
            fused_site=SITE_TINY,
            fused_sizes=(4,),  # one compile: tens of seconds
            fused_seconds=0.2,
            fused_rounds=1,
            fused_years=False,
        )


# The algorithms the training section compiles, as configs/sac_per_socket_cpu.yaml does (the compact-observation
# sac_cpu.yaml runs eagerly, its lean loss's eager update the faster one there: docs/performance.md "Hardware
# profiles"): SAC, whose learner must keep
# up with the worker that collects one rollout ahead (benchmarks/bench_speed.py, 64x64 at the 38-socket site's
# shapes: 54 -> 105 updates/s). PPO and A2C spend most of a rollout collecting; compiling their few updates per
# rollout made no difference beyond the machine's noise, so they stay eager (docs/performance.md).
COMPILED_ON_CPU = ("SAC",)


def learner_compiles(config: BenchConfig) -> bool:
    """Whether the learner section times ours compiled beside ours eager: unless ``--compile off`` (``--quick``: only
    with ``--compile on``, the test's run stays short). PPO's fast path is the compiled update, which ``profile: auto``
    runs on a CPU, so the default run shows it next to the eager one (docs/performance.md)."""
    return config.compile is True or (config.compile is None and not config.learner_quick)


def our_architecture(algorithm: str, config: BenchConfig) -> OurArchitecture:
    """How our side runs: what a user on this machine gets from the ``*_cpu`` config, unless the bench config says.

    SAC collects one rollout ahead in one worker process (its updates take the training process's core) and
    compiles its update; PPO and A2C are on-policy, so they collect in parallel, one worker per core, and wait.
    """
    cores = os.cpu_count() or 1
    overlap = algorithm == "SAC" and (config.overlap is None or config.overlap)
    workers = (1 if overlap else cores) if config.num_workers is None else config.num_workers
    compiled = algorithm in COMPILED_ON_CPU if config.compile is None else config.compile
    return OurArchitecture(num_workers=workers, overlap=overlap, compiled=compiled)


def _scaled_settings(config: BenchConfig) -> list[AlgorithmSettings]:
    """Each algorithm's matched settings with its timed frames scaled (never below one rollout)."""
    settings = []
    for name in config.algorithms:
        base = DEFAULT_SETTINGS[name]
        measured = max(base.rollout_frames, int(base.measured_frames * config.frame_scale))
        settings.append(replace(base, measured_frames=measured))
    return settings


def _progress(message: str, start: float) -> None:
    """One line per section on stderr, so a long run shows where it is (the report goes to stdout)."""
    print(f"[bench {time.perf_counter() - start:5.0f} s] {message}", file=sys.stderr, flush=True)


def run_bench(config: BenchConfig, command: str = "python -m iquitos_lightning bench") -> tuple[str, dict]:
    """Run the configured sections; return the Markdown report and the raw figures."""
    # lazy: `bench` loads only the sections it is asked for (torch, CityLearn, SB3 are heavy)
    import torch

    from benchmarks.bench import report
    from benchmarks.bench.timing import machine_description

    torch.set_num_threads(config.threads)
    data_root = Path(config.data_root)
    start = time.perf_counter()
    machine = machine_description()
    sections: list[str] = []
    figures: dict = {"config": asdict(config), "machine": machine}

    if "env" in config.sections:
        _progress("env steps/s", start)
        # lazy: `bench` loads only the sections it is asked for (torch, CityLearn, SB3 are heavy)
        from benchmarks.bench.env_speed import measure_env_speed
        from benchmarks.bench.twin import card_env_config, env_table_row, twin_rows_or_error

        speeds = [
            measure_env_speed(site, data_root=data_root, steps=config.env_steps, rounds=config.env_rounds)
            for site in config.env_sites
        ]
        _progress("training twin frames/s vs num_envs", start)
        twin_config = card_env_config(config.twin_site, str(data_root), years=config.twin_years)
        scaling = twin_rows_or_error(twin_config, config.twin_sizes, seconds=config.twin_seconds)
        twin = env_table_row(scaling)
        sections.append(report.env_section(speeds, twin))
        sections.append(report.twin_scaling_section(scaling, twin_config, config.twin_seconds))
        figures["env"] = [asdict(speed) for speed in speeds] + [asdict(twin)]
        figures["twin_scaling"] = [asdict(row) for row in scaling]
        if config.fit_sizes:
            _progress("the card's PPO fit frames/s vs num_envs (one process each)", start)
            # lazy: `bench` loads only the sections it is asked for (torch, CityLearn, SB3 are heavy)
            from benchmarks.bench.fit_scaling import measure_fit_scaling

            fits = measure_fit_scaling(config.fit_sizes)
            sections.append(report.fit_scaling_section(fits))
            figures["fit_scaling"] = [asdict(row) for row in fits]

    if "training" in config.sections:
        _progress("training: ours vs Stable-Baselines3", start)
        # lazy: `bench` loads only the sections it is asked for (torch, CityLearn, SB3 are heavy)
        from benchmarks.bench.sb3 import INSTALL_HINT, sb3_available
        from benchmarks.bench.training import compare_training

        if sb3_available():
            comparisons = []
            for settings in _scaled_settings(config):
                comparison = compare_training(
                    settings,
                    config.training_site,
                    data_root=data_root,
                    rounds=config.training_rounds,
                    architecture=our_architecture(settings.algorithm, config),
                )
                comparisons.append(comparison)
            sections.append(report.training_section(comparisons, Path(config.training_site).stem))
            figures["training"] = [asdict(row) for row in comparisons]
        else:
            sections.append(f"### Training throughput vs Stable-Baselines3\n\nskipped: {INSTALL_HINT}")

    if "memory" in config.sections:
        _progress("memory vs buffer capacity (one process each)", start)
        # lazy: `bench` loads only the sections it is asked for (torch, CityLearn, SB3 are heavy)
        from benchmarks.bench.memory import measure_memory

        capacities = list(config.capacities)
        points = measure_memory(
            config.memory_site, capacities, config.storages, data_root=data_root, frames=config.memory_frames
        )
        sections.append(report.memory_section(points, Path(config.memory_site).stem))
        figures["memory"] = [asdict(point) for point in points]

    if "workers" in config.sections:
        _progress("collection vs env workers", start)
        # lazy: `bench` loads only the sections it is asked for (torch, CityLearn, SB3 are heavy)
        from benchmarks.bench.workers import measure_worker_scaling

        scaling = measure_worker_scaling(
            config.workers_site,
            list(config.worker_counts),
            data_root=data_root,
            frames_per_worker=config.worker_frames,
            rounds=config.worker_rounds,
        )
        sections.append(report.workers_section(scaling, Path(config.workers_site).stem))
        figures["workers"] = [asdict(row) for row in scaling]

    if "learner" in config.sections:
        _progress("learner: ours vs plain PyTorch loops on the twin", start)
        # lazy: `bench` loads only the sections it is asked for (torch, CityLearn, SB3 are heavy)
        from benchmarks.bench.learner import LearnerConfig, measure_learner

        learner = LearnerConfig.quick if config.learner_quick else LearnerConfig
        result = measure_learner(
            learner(
                site=config.learner_site,
                data_root=str(data_root),
                rounds=config.learner_rounds,
                rollout_scale=config.frame_scale,
                compiled=learner_compiles(config),
                fused_adam=config.fused_adam,
            )
        )
        sections.append(report.learner_section(result, Path(config.learner_site).stem))
        figures["learner"] = asdict(result)

    if "fused" in config.sections:
        _progress("fused vs eager training twin frames/s (a compile per size)", start)
        # lazy: `bench` loads only the sections it is asked for (torch, CityLearn, SB3 are heavy)
        from benchmarks.bench.fused_twin import measure_fused_twin
        from benchmarks.bench.twin import card_env_config

        fused_config = card_env_config(config.fused_site, str(data_root), years=config.fused_years)
        rows = measure_fused_twin(
            fused_config, config.fused_sizes, seconds=config.fused_seconds, rounds=config.fused_rounds
        )
        sections.append(report.fused_twin_section(rows, fused_config, config.fused_seconds, config.fused_rounds))
        figures["fused_twin"] = [row.figures() for row in rows]

    seconds = time.perf_counter() - start
    figures["seconds"] = seconds
    text = "\n\n".join([report.machine_section(machine, command, seconds), *sections])
    return text, figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iquitos_lightning bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny site, few frames: checks that everything runs")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=None)
    parser.add_argument(
        "--num-workers", type=int, default=None, help="our collection workers (default: SAC 1, PPO/A2C one per core)"
    )
    parser.add_argument(
        "--overlap",
        choices=("on", "off"),
        default=None,
        help="SAC collects one rollout ahead in a worker process (default on; off: workers or in-process)",
    )
    parser.add_argument(
        "--compile",
        choices=("on", "off"),
        default=None,
        help=(
            "torch.compile our update step (default in the training section: SAC on, at the 38-socket per-socket "
            "shapes where it pays, as configs/sac_per_socket_cpu.yaml; PPO and A2C off; the learner section adds ours "
            "compiled beside ours eager unless off)"
        ),
    )
    parser.add_argument(
        "--fused-adam",
        choices=("on", "off"),
        default=None,
        help="the learner section's ours steps Adam's fused kernel (speed.fused_adam; default off, as the profiles)",
    )
    parser.add_argument("--rounds", type=int, default=None, help="training and learner rounds (ours/other pairs)")
    parser.add_argument("--frame-scale", type=float, default=None, help="multiply the measured frames (rollouts)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads for both sides (default 1)")
    parser.add_argument(
        "--twin-sizes",
        type=int,
        nargs="+",
        default=None,
        help="the training twin's num_envs (default 64 256 1024 4096)",
    )
    parser.add_argument(
        "--fit-sizes",
        type=int,
        nargs="*",
        default=None,
        help="the card's PPO fit at these num_envs, one process each (default 64 256 1024; none: left out)",
    )
    parser.add_argument(
        "--fused-sizes",
        type=int,
        nargs="+",
        default=None,
        help="the fused section's num_envs (default 64 256 1024 4096; --sections fused)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the raw figures here")
    args = parser.parse_args(argv)
    config = BenchConfig.quick() if args.quick else BenchConfig()
    overrides = {
        "sections": tuple(args.sections) if args.sections else None,
        "num_workers": args.num_workers,
        "overlap": None if args.overlap is None else args.overlap == "on",
        "compile": None if args.compile is None else args.compile == "on",
        "training_rounds": args.rounds,
        "learner_rounds": args.rounds,
        "frame_scale": args.frame_scale,
        "threads": args.threads,
        "twin_sizes": tuple(args.twin_sizes) if args.twin_sizes else None,
        "fused_adam": None if args.fused_adam is None else args.fused_adam == "on",
        "fit_sizes": None if args.fit_sizes is None else tuple(args.fit_sizes),
        "fused_sizes": tuple(args.fused_sizes) if args.fused_sizes else None,
        "fused_rounds": args.rounds,
    }
    config = replace(config, **{key: value for key, value in overrides.items() if value is not None})
    command = "python -m iquitos_lightning bench " + shlex.join(argv or [])
    text, figures = run_bench(config, command.strip())
    print(text)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
