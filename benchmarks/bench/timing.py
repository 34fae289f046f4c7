"""Timing helpers shared by the bench modules: interleaved rounds, medians, the machine's description.

Why interleaved: on a shared 2-core machine the load changes from one second to the next; running
side A then side B would fold the change into the ratio. Rounds of A, B, A, B... and the median of
the per-round ratios cancel most of it.
"""

from __future__ import annotations

import gc
import os
import platform
import resource
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch


@dataclass
class Rate:
    """Counts over a wall-clock interval (frames, updates, steps...)."""

    seconds: float
    counts: dict[str, float] = field(default_factory=dict)

    def per_second(self, name: str) -> float:
        return self.counts[name] / self.seconds if self.seconds > 0 else float("nan")


def interleave(sides: dict[str, Callable[[], Rate]], rounds: int) -> dict[str, list[Rate]]:
    """Run each side once per round, in the same order every round; every side's rates, by round."""
    results: dict[str, list[Rate]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, run in sides.items():
            results[name].append(run())
    return results


@contextmanager
def setup_kept_out_of_collections() -> Iterator[None]:
    """Python's garbage collector leaves alone every object alive when this opens (``gc.freeze``), until it closes.

    Why: a timed side builds its agent or networks, twin and Trainer first (and the bench builds an agent to read
    the plain loop's settings), and that setup's garbage sets off one full collection a few seconds later, ~0.3 s
    of scanning the interpreter's objects on the 2-core machine: inside a side's ~10-second window it moved a
    round's rate by ~3 %, on either side, as the timing fell (measured with ``gc.callbacks``: one generation-2
    collection in SAC's window on both sides, before PPO's plain window). Frozen objects are not scanned, so no such
    collection happens in a window; collections of what a run creates go on as they would. The objects are handed
    back to the collector when the side ends (``gc.unfreeze``), so a bench of many runs keeps nothing alive."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def median_rate(rates: Sequence[Rate], name: str) -> float:
    return statistics.median(rate.per_second(name) for rate in rates)


def median_ratio(numerator: Sequence[Rate], denominator: Sequence[Rate], name: str) -> float:
    """Median over rounds of (numerator rate / denominator rate) measured in the same round."""
    pairs = zip(numerator, denominator, strict=True)
    return statistics.median(a.per_second(name) / b.per_second(name) for a, b in pairs)


def ratio_range(numerator: Sequence[Rate], denominator: Sequence[Rate], name: str) -> tuple[float, float]:
    """The lowest and highest per-round ratio (numerator rate / denominator rate in the same round): how far the
    median could move with the machine's noise."""
    ratios = [a.per_second(name) / b.per_second(name) for a, b in zip(numerator, denominator, strict=True)]
    return min(ratios), max(ratios)


def timed(run: Callable[[], dict[str, float]]) -> Rate:
    """Time ``run``, which returns the counts it did."""
    start = time.perf_counter()
    counts = run()
    return Rate(time.perf_counter() - start, counts)


def peak_rss_bytes() -> int:
    """This process's peak resident memory: ``VmHWM`` of /proc/self/status where there is one.

    Not ``ru_maxrss`` on Linux: it survives ``exec``, so a child started from a big parent reports the
    parent's peak (every point of the memory table read the bench's own 1.9 GiB that way).
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_description() -> dict[str, str]:
    """What the numbers were measured on, including how busy the machine was."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    description = {
        "cpu": cpu_name(),
        "cores": str(os.cpu_count()),
        "torch threads": str(torch.get_num_threads()),
        "load average (1/5/15 min)": " / ".join(f"{value:.1f}" for value in load),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    if torch.cuda.is_available():
        description["gpu"] = torch.cuda.get_device_name(0)
    return description
