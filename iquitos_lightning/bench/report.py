"""The bench's printed table: Markdown, so the same text goes to the terminal and docs/performance.md."""

from __future__ import annotations

from collections.abc import Sequence

from iquitos_lightning.bench.env_speed import TORCHRL_LAYER, EnvSpeed
from iquitos_lightning.bench.memory import MemoryPoint
from iquitos_lightning.bench.training import TrainingComparison
from iquitos_lightning.bench.twin import TwinSpeed
from iquitos_lightning.bench.workers import WorkerScaling


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
    title = f"### Collection frames/s vs env workers (`--model.env.num_workers`, random policy, {site})"
    return title + "\n\n" + _table(["workers", "frames/s", "speed-up"], body)
