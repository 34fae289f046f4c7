"""The fused (``torch.compile``d) training twin against the eager one, at each batch size, side by side in one run.

Why this measurement: ``env.backend.compile`` (``IquitosTwin(compile_physics=True)``) fuses the step's physics into a
few kernels, which costs a compile (tens of seconds per batch size on a CPU) before it saves anything. Whether it pays
for a run is the compile time against the time saved over the run's frames, and that depends on the batch: a
per-step saving of the Python and dispatch overhead of the eager step's hundred-odd small ops shrinks, relative to the
arithmetic, as the batch grows. So each size gets both rates, their ratio, the compile time and the frames a run must
collect before the compile is paid back; and whether the fused twin's first rollout was bit-equal to the eager one's
(the same random actions), since a run may only switch if it gives the very same trajectories.

The twins are the card's training twin (bench/twin.py: configs/base/card.yaml's problem, ``self_consumption_window``,
``tariff``, staggered 720-h episodes over the training years), stepped by TorchRL's ``Collector`` with a random policy
as bench/twin.py steps them. Each side's first rollout is untimed (the fused one's includes the compile, reported as
its excess over the eager one's first rollout); then windows of each side alternate (eager, fused, eager, fused...),
so a change in the machine's load falls on both. Rates per wall second and per second of this process's CPU time (on
a machine shared with other jobs the CPU-time rate says what the code costs; with one torch thread it is one core's).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import torch

from benchmarks.bench.twin import STEPS_PER_ROLLOUT, twin_maker

SIDES = ("eager", "fused")


@dataclass
class FusedTwinRow:
    """The eager and the fused training twin at one batch size (CPU)."""

    num_envs: int
    status: str  # "measured", or why not
    eager_frames_per_s: float | None = None
    fused_frames_per_s: float | None = None
    eager_frames_per_cpu_s: float | None = None
    fused_frames_per_cpu_s: float | None = None
    compile_s: float | None = None  # the fused twin's first rollout's wall time over the eager twin's
    bit_equal: bool | None = None  # the first rollouts (same random actions) equal in every key, bit for bit
    rounds: int = 0
    threads: int = 1

    @property
    def ratio(self) -> float | None:
        """Fused frames/s over eager frames/s (wall clock)."""
        return _ratio(self.fused_frames_per_s, self.eager_frames_per_s)

    @property
    def ratio_cpu(self) -> float | None:
        return _ratio(self.fused_frames_per_cpu_s, self.eager_frames_per_cpu_s)

    @property
    def break_even_frames(self) -> float | None:
        """Frames after which the compile is paid back: compile time over the time saved per frame (None: it saves
        none)."""
        eager, fused = self.eager_frames_per_s, self.fused_frames_per_s
        if eager is None or fused is None or self.compile_s is None or fused <= eager:
            return None
        return self.compile_s / (1 / eager - 1 / fused)

    def figures(self) -> dict[str, Any]:
        """The row's fields and the figures derived from them (the bench's ``--json``)."""
        derived = {"ratio": self.ratio, "ratio_cpu": self.ratio_cpu, "break_even_frames": self.break_even_frames}
        return asdict(self) | derived


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return None if numerator is None or not denominator else numerator / denominator


def measure_fused_twin(
    config: Any, sizes: tuple[int, ...], *, seconds: float = 2.0, rounds: int = 2
) -> list[FusedTwinRow]:
    """One row per size: both twins built (tables shared), each side's first rollout untimed, then ``rounds`` rounds of
    a window of at least ``seconds`` per side. A size that fails reports why in its row; the others still run."""
    rows = []
    with twin_maker(config) as make:
        for size in sizes:
            try:
                twins = {side: make(size, compile_physics=side == "fused") for side in SIDES}
                rows.append(_measure_pair(twins, seconds, rounds))
            except Exception as error:  # a row reports, it never aborts the table
                rows.append(FusedTwinRow(size, f"error: {type(error).__name__}: {error}"[:300]))
            twins = {}
    return rows


def _measure_pair(twins: dict[str, Any], seconds: float, rounds: int) -> FusedTwinRow:
    # lazy: TorchRL's collectors load only when a twin is measured
    from torchrl.collectors import Collector

    collectors = {
        side: Collector(
            twin,
            None,
            frames_per_batch=twin.num_envs * STEPS_PER_ROLLOUT,
            total_frames=-1,
            auto_register_policy_transforms=False,
            track_traj_ids=False,
        )  # fmt: skip
        for side, twin in twins.items()
    }
    try:
        streams = {side: iter(collector) for side, collector in collectors.items()}
        first, first_s = {}, {}
        for side, stream in streams.items():
            torch.manual_seed(0)  # the random policy draws the same actions on both sides
            started = time.perf_counter()
            first[side] = next(stream).exclude("collector")
            first_s[side] = time.perf_counter() - started
        frames = dict.fromkeys(SIDES, 0)
        wall = dict.fromkeys(SIDES, 0.0)
        cpu = dict.fromkeys(SIDES, 0.0)
        for _ in range(rounds):
            for side, stream in streams.items():
                window = _window(stream, twins[side], seconds)
                frames[side] += window[0]
                wall[side] += window[1]
                cpu[side] += window[2]
    finally:
        for collector in collectors.values():
            collector.shutdown()
    eager, fused = first["eager"], first["fused"]
    equal = all(torch.equal(fused.get(key), value) for key, value in eager.items(include_nested=True, leaves_only=True))
    size = twins["eager"].num_envs
    return FusedTwinRow(
        size, "measured",
        eager_frames_per_s=frames["eager"] / wall["eager"], fused_frames_per_s=frames["fused"] / wall["fused"],
        eager_frames_per_cpu_s=frames["eager"] / cpu["eager"], fused_frames_per_cpu_s=frames["fused"] / cpu["fused"],
        compile_s=max(first_s["fused"] - first_s["eager"], 0.0), bit_equal=equal, rounds=rounds,
        threads=torch.get_num_threads(),
    )  # fmt: skip


def _window(stream: Iterator[Any], twin: Any, seconds: float) -> tuple[int, float, float]:
    """Rollouts of ``stream`` for at least ``seconds`` (and two), each checked as agents/collection.py checks one:
    frames, wall seconds, CPU seconds."""
    frames, timed = 0, 0
    started, cpu = time.perf_counter(), time.process_time()
    while timed < 2 or time.perf_counter() - started < seconds:
        rollout = next(stream)
        if not twin.checks_every_step:
            twin.check_rollout(rollout)
        frames += rollout.numel()
        timed += 1
    return frames, time.perf_counter() - started, time.process_time() - cpu


def fused_cells(rows: list[FusedTwinRow]) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the fused-vs-eager table."""
    header = ["num_envs", "eager frames/s", "fused frames/s", "fused / eager", "per CPU s: eager / fused (ratio)"]
    header += ["compile s", "frames to repay the compile", "first rollout bit-equal", "torch threads"]
    body = []
    for row in rows:
        if row.status != "measured":
            body.append([f"{row.num_envs:,}", row.status, *["-"] * (len(header) - 2)])
            continue
        cpu = f"{row.eager_frames_per_cpu_s:,.0f} / {row.fused_frames_per_cpu_s:,.0f} ({row.ratio_cpu:.2f}x)"
        repay = "never (no faster)" if row.break_even_frames is None else f"{row.break_even_frames:,.0f}"
        body.append(
            [f"{row.num_envs:,}", f"{row.eager_frames_per_s:,.0f}", f"{row.fused_frames_per_s:,.0f}"]
            + [f"{row.ratio:.2f}x", cpu, f"{row.compile_s:.1f}", repay, "yes" if row.bit_equal else "NO"]
            + [str(row.threads)]
        )
    return header, body


FUSED_NOTE = (
    "The card's training twin (configs/base/card.yaml: layout self_consumption_window, objective tariff, staggered "
    "720-h episodes{years}) eager and fused (`env.backend.compile`: torch.compile of the step's physics), each stepped "
    "by TorchRL's `Collector` with a random policy, rollouts of {steps} steps; each side's first rollout untimed, then "
    "{rounds} rounds of at least {seconds:g} s per side, alternating. *compile s*: the fused first rollout's wall time "
    "over the eager one's; *frames to repay the compile*: compile s / (1 / eager rate - 1 / fused rate), wall clock; "
    "*first rollout bit-equal*: both first rollouts (the same random actions) equal in every key. The collector's own "
    "cost is in both rates, no policy network and no update."
)


def fused_note(config: Any, seconds: float, rounds: int) -> str:
    seeds = config.training.train_site_seeds
    years = f" over the training years {', '.join(map(str, seeds))}" if seeds else " on the site's own year"
    return FUSED_NOTE.format(years=years, steps=STEPS_PER_ROLLOUT, rounds=rounds, seconds=seconds)
