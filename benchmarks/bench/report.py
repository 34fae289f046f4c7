"""The bench's printed table: Markdown, so the same text goes to the terminal and docs/performance.md."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from benchmarks.bench.env_speed import TORCHRL_LAYER, EnvSpeed
from benchmarks.bench.fit_scaling import FitScalingRow
from benchmarks.bench.fused_twin import FusedTwinRow, fused_cells, fused_note
from benchmarks.bench.learner import LearnerResult
from benchmarks.bench.learner_profile import ROWS as PHASE_ROWS
from benchmarks.bench.memory import MemoryPoint
from benchmarks.bench.training import TrainingComparison
from benchmarks.bench.twin import TwinScalingRow, TwinSpeed, scaling_cells, scaling_note, site_name
from benchmarks.bench.workers import WorkerScaling


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def machine_section(machine: dict[str, str], command: str, seconds: float) -> str:
    rows = [[key, value] for key, value in machine.items()]
    rows += [["command", f"`{command}`"], ["bench wall time", f"{seconds:.0f} s"]]
    return "### Machine\n\n" + _table(["", ""], rows)


def env_section(speeds: Sequence[EnvSpeed], twin: TwinSpeed | None) -> str:
    rows = []
    for speed in speeds:
        rates, overhead = speed.steps_per_s, speed.overhead
        row = [f"{speed.site} ({speed.sockets} sockets)", f"{rates['raw']:.1f}"]
        for layer in ("gym", "torchrl"):
            row += [f"{rates[layer]:.1f}", f"{overhead[layer]:+.1%}"]
        row.append(f"{overhead[TORCHRL_LAYER]:+.1%}")
        for layer in ("gym_before", "torchrl_before"):
            row.append(f"{overhead[layer]:+.1%}" if layer in overhead else "-")
        rows.append(row)
    if twin is not None:
        rate = "-" if twin.steps_per_s is None else f"{twin.steps_per_s:.1f} ({twin.num_envs} envs)"
        rows.append(["twin (vectorized)", "-", "-", "-", rate, twin.status, "-", "-", "-"])
    header = ["site", "raw CityLearn steps/s", "IquitosEnv steps/s", "overhead", "TorchRL env steps/s", "overhead"]
    header += ["TorchRL layer over IquitosEnv"]
    header += ["before: IquitosEnv overhead", "before: TorchRL chain overhead"]
    note = (
        "Overhead = raw rate / wrapped rate - 1 (median of per-round ratios); negative: the wrapped env is "
        "faster than `CityLearnEnv.step` as CityLearn ships it (it skips assembling CityLearn's observations "
        "and its action-feedback records, which nothing reads). The TorchRL env is what agents step (FlatGymEnv "
        "over IquitosEnv); *TorchRL layer over IquitosEnv* = IquitosEnv rate / TorchRL env rate - 1, the per-step "
        "cost that is ours alone (SB3 steps IquitosEnv too). *Before* = the stack before the fast paths "
        "(IquitosEnv on CityLearn's public `step` with its records on; GymWrapper + DoubleToFloat + StepCounter + "
        "RewardSum), measured in the same rounds."
    )
    return "### Environment steps/s\n\n" + _table(header, rows) + "\n\n" + note


def twin_scaling_section(rows: Sequence[TwinScalingRow], config: Any, seconds: float) -> str:
    """The training twin's frames/s against num_envs (bench/twin.py), each size's ratio to the first."""
    header, body = scaling_cells([asdict(row) for row in rows])
    title = f"### Training twin frames/s vs num_envs ({site_name(config)}, collector, random policy)\n\n"
    note = scaling_note(config, seconds) + (
        " The card's whole PPO fit against num_envs is the next table (left out by `--quick`); `gpu-check --only "
        "device-twin` times the card's fits with the twin on a GPU."
    )
    return title + _table(header, body) + "\n\n" + note


def fused_twin_section(rows: Sequence[FusedTwinRow], config: Any, seconds: float, rounds: int) -> str:
    """The fused (compiled) training twin against the eager one per num_envs (bench/fused_twin.py)."""
    header, body = fused_cells(list(rows))
    title = f"### Fused vs eager training twin frames/s ({site_name(config)}, collector, random policy)\n\n"
    return title + _table(header, body) + "\n\n" + fused_note(config, seconds, rounds)


def fit_scaling_section(rows: Sequence[FitScalingRow]) -> str:
    """The card's PPO fit's frames/s against num_envs (bench/fit_scaling.py), each size's ratio to the first."""
    body = [
        [f"{row.num_envs:,}", f"{row.frames_per_s:,.0f}" if row.frames_per_s else row.status,
         f"{row.ratio_to_first:.2f}x" if row.ratio_to_first else "-", str(row.timed_rollouts)]
        for row in rows
    ]  # fmt: skip
    title = "### The card's PPO fit frames/s vs num_envs (configs/ppo_cpu.yaml, only num_envs changed)\n\n"
    note = (
        "Each row a fit in its own process: 8,192 frames a rollout (128 steps of 64 envs ... 8 of 1,024) and the "
        "card's 160 Adam steps each, frames/s after the first rollout, no evaluation. The update work per frame is the "
        "same in every row, so the fit gains less than the twin alone."
    )
    return title + _table(["num_envs", "frames/s", "x first size", "timed rollouts"], body) + "\n\n" + note


def training_section(comparisons: Sequence[TrainingComparison], site: str) -> str:
    rows = []
    for row in comparisons:
        rows.append(
            [
                row.settings.algorithm,
                f"{row.ours_frames_per_s:.1f}",
                f"{row.sb3_frames_per_s:.1f}",
                f"**{row.frames_ratio:.2f}x**",
                f"{row.ours_updates_per_s:.1f}",
                f"{row.sb3_updates_per_s:.1f}",
                f"{row.updates_ratio:.2f}x",
                row.architecture.describe(),
                row.settings.describe(),
            ]
        )
    header = ["algorithm", "ours frames/s", "SB3 frames/s", "frames ratio", "ours updates/s", "SB3 updates/s"]
    header += ["updates ratio", "our architecture", "matched settings"]
    note = (
        "Our architecture is the difference the comparison measures, as the `*_cpu` configs run it: *in-process* "
        "steps the env between updates as SB3 does; *N workers* step N envs in N processes and learn on the "
        "gathered rollout (SB3 then gets N envs in its `DummyVecEnv`, same rollout frames); *one rollout ahead* "
        "collects the next rollout in a worker process while the current one trains (`--model.rollout.overlap "
        "true`, off-policy only); *compiled update*: the losses' forward and backward run `torch.compile`d "
        "(`--model.speed.compile true`; its compilation falls in the untimed warm-up)."
    )
    title = f"### Training throughput inside `fit` vs Stable-Baselines3 ({site})\n\n"
    return title + _table(header, rows) + "\n\n" + note


def memory_section(points: Sequence[MemoryPoint], site: str) -> str:
    rows = []
    for point in points:
        vram = "n/a (no CUDA)" if point.peak_vram_mib is None else f"{point.peak_vram_mib:.0f}"
        rows.append(
            [
                point.storage,
                f"{point.capacity:,}",
                f"{point.buffer_full_size_mib:.0f}",
                f"{point.peak_rss_mib:.0f}",
                vram,
            ]
        )
    header = ["storage", "capacity", "full buffer MiB", "peak RSS MiB", "peak VRAM MiB"]
    return f"### Peak memory vs replay buffer capacity (SAC fit, {site})\n\n" + _table(header, rows)


def workers_section(rows: Sequence[WorkerScaling], site: str) -> str:
    body = [[str(row.workers), f"{row.frames_per_s:.1f}", f"{row.speedup:.2f}x"] for row in rows]
    title = f"### Collection frames/s vs env workers (`--model.env.backend.num_workers`, random policy, {site})"
    return title + "\n\n" + _table(["workers", "frames/s", "speed-up"], body)


# The goals for ours / plain frames/s (issue 31), printed next to each ratio.
LEARNER_GOALS = {"PPO": 0.95, "A2C": 0.95, "SAC": 0.9}


def ratio_cell(ratio: float, spread: tuple[float, float] | None) -> str:
    """A median ratio in bold, with the lowest and highest of its rounds when there were several."""
    cell = f"**{ratio:.2f}x**"
    if spread is not None and spread[0] != spread[1]:
        cell += f" ({spread[0]:.2f}-{spread[1]:.2f})"
    return cell


def goal_cell(goal: float | None, eager: float, compiled: float | None) -> str:
    """The goal and whether the median met it: eagerly ("met"), only with the update compiled ("met compiled"), or
    not ("not met")."""
    if goal is None:
        return "-"
    if eager >= goal:
        verdict = "met"
    elif compiled is not None and compiled >= goal:
        verdict = "met compiled"
    else:
        verdict = "not met"
    return f"{goal:.2f}x: {verdict}"


def learner_section(result: LearnerResult, site: str) -> str:
    """Ours vs the plain loop, PPO compact vs full observation, and where our time goes (issue 31)."""
    rows = []
    for row in result.rows:
        goal = LEARNER_GOALS.get(row.algorithm)
        rows.append(
            [
                row.algorithm,
                f"{row.project_frames_per_s:,.0f}",
                f"{row.plain_frames_per_s:,.0f}",
                ratio_cell(row.frames_ratio, row.frames_ratio_range),
                goal_cell(goal, row.frames_ratio, row.compiled_ratio),
                f"{row.project_updates_per_s:,.1f}",
                f"{row.plain_updates_per_s:,.1f}",
                f"{row.updates_ratio:.2f}x",
                row.settings,
            ]
        )
    header = ["algorithm", "ours frames/s", "plain frames/s", "ours / plain", "goal", "ours updates/s"]
    header += ["plain updates/s", "updates ratio", "settings (experiment profile)"]
    if any(row.compiled_ratio is not None for row in result.rows):  # ours compiled, same rounds (not --compile off)
        header[4:4] = ["ours compiled frames/s", "compiled / plain"]
        for row, cells in zip(result.rows, rows, strict=True):
            cells[4:4] = [f"{row.compiled_frames_per_s:,.0f}", ratio_cell(row.compiled_ratio, row.compiled_ratio_range)]
    rounds = result.rows[0].rounds if result.rows else 0
    note = (
        "Ours: the agent through `fit` (bench Trainer: no logger, checkpoints or evaluation) at its "
        "`configs/experiments/tariff/*_fleet_tariff_twin_cpu.yaml` settings, twin backend, one process. Plain: "
        "`bench/plain_loops.py`, the same algorithm, networks, optimizers and sizes written as one PyTorch loop "
        f"on the same twin (its TorchRL API, no transforms), nothing logged. Ratios: median over {rounds} "
        "interleaved rounds of the per-round ratio (in brackets the lowest and highest round: the machine's noise); "
        "rates from the end of the warm-up to the last rollout (ours compiled compiles its update once, in the "
        "warm-up; `--compile off` leaves that side out)."
    )
    if result.fused_adam:
        note += " Ours steps Adam's fused kernel (`--fused-adam on`, `speed.fused_adam`); the plain loop `foreach`'s."
    text = f"### Learner throughput on the twin: ours vs a plain PyTorch loop ({site})\n\n"
    text += _table(header, rows) + "\n\n" + note
    if result.observation is not None:
        obs = result.observation
        body = [
            [
                "compact (profile)",
                str(obs.compact_inputs),
                f"{obs.compact_frames_per_s:,.0f}",
                f"**{obs.ratio:.2f}x**",
                f"{obs.plain_compact_frames_per_s:,.0f}",
                f"{obs.plain_ratio:.2f}x",
            ],
            ["full", str(obs.full_inputs), f"{obs.full_frames_per_s:,.0f}", "1.00x"]
            + [f"{obs.plain_full_frames_per_s:,.0f}", "1.00x"],
        ]
        text += "\n\n#### PPO: compact vs full observation, same settings and rounds (goal for ours: 2x)\n\n"
        header = ["observation", "inputs", "ours frames/s", "ours ratio", "plain frames/s", "plain ratio"]
        text += _table(header, body)
        text += (
            "\n\nThe plain loop's ratio is what the smaller first layer buys the same update without the library's "
            "costs around it: ours can reach it, not pass it, unless ours outruns the plain loop on the compact side."
        )
    if result.profiles:
        text += "\n\n" + learner_profile_table(result)
    return text


def learner_profile_table(result: LearnerResult) -> str:
    """Share of the profiled time per phase, one column per algorithm."""
    profiles = result.profiles
    present = [row for row in PHASE_ROWS if any(profile.rows.get(row, 0.0) for profile in profiles)]
    body = [[row, *(f"{profile.share(row):.1%}" for profile in profiles)] for row in present]
    body.append(["total", *(f"{sum(profile.share(row) for row in present):.1%}" for profile in profiles)])
    body.append(["profiled µs per frame", *(f"{profile.microseconds_per_frame:.1f}" for profile in profiles)])
    header = ["phase (share of the profiled window)", *(profile.algorithm for profile in profiles)]
    note = (
        "One more `fit` of each algorithm (ours) under cProfile over the same window; each phase is the "
        "inclusive time of the functions that open it less its nested phases (`bench/learner_profile.py`), "
        "*other* the rest. cProfile slows Python-heavy code most, so these shares lean towards collector "
        "bookkeeping, indexing and logging; the timed rows above give the speed."
    )
    return "#### Where our time goes (cProfile)\n\n" + _table(header, body) + "\n\n" + note
