"""Memory of a training run, logged every N batches, with one warning before it runs out.

Why: an RL run that dies of out-of-memory after hours loses the night; one that creeps towards the
limit can be seen coming. On CUDA this logs the torch allocator's view (allocated, reserved, peak:
cheap counters) and the whole device's used/total (NVML through ``nvidia-ml-py`` when installed,
else ``cudaMemGetInfo``), the figure ``nvidia-smi`` shows and the one that runs out, since other
processes and the CUDA context count too. On a CPU it logs the process's resident memory (RSS,
from ``/proc/self/statm``) and its peak (``resource.getrusage``), against the machine's RAM.

Metric names (GiB, as torch and nvidia-smi count): ``vram/allocated_gb``, ``vram/reserved_gb``,
``vram/peak_gb``, ``vram/device_used_gb``, ``vram/device_total_gb``, ``vram/device_used_fraction``
on CUDA; ``memory/rss_gb``, ``memory/peak_rss_gb``, ``memory/host_total_gb``,
``memory/rss_fraction`` on CPU. :attr:`VRAMMonitor.measures` (also logged once at start) says which.

The monitor only observes and needs nothing from the LightningModule, so it works in any Lightning
project. Reads happen only on logging batches; everything that turns numbers into metrics and
warnings is a pure function (:func:`cuda_reading`, :func:`cpu_reading`, :func:`crossed_threshold`)
testable without a GPU.
"""

from __future__ import annotations

import os
import resource
import sys
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities.rank_zero import rank_zero_info, rank_zero_warn

from iquitos_lightning.errors import ConfigError

GIB = 1024**3


@dataclass(frozen=True)
class MemoryReading:
    """One look at the memory that can run out: metrics to log, and the usage checked against the threshold."""

    kind: str  # "cuda" or "cpu"
    metrics: dict[str, float] = field(default_factory=dict)
    used_bytes: int = 0  # what counts towards running out: device used on CUDA, RSS on CPU
    total_bytes: int | None = None  # device memory on CUDA, physical RAM on CPU

    @property
    def used_fraction(self) -> float | None:
        return self.used_bytes / self.total_bytes if self.total_bytes else None

    def short_text(self) -> str:
        """E.g. ``3.1/8.0 GB`` for a progress bar."""
        if self.total_bytes:
            return f"{self.used_bytes / GIB:.1f}/{self.total_bytes / GIB:.1f} GB"
        return f"{self.used_bytes / GIB:.1f} GB"


def cuda_reading(
    allocated_bytes: int,
    reserved_bytes: int,
    peak_bytes: int,
    device_used_bytes: int | None = None,
    device_total_bytes: int | None = None,
) -> MemoryReading:
    """Metrics of a CUDA device from the torch allocator counters and, when known, the device totals.

    Without a device-wide figure, the allocator's reserved memory is the best lower bound of use.
    """
    metrics = {
        "vram/allocated_gb": allocated_bytes / GIB,
        "vram/reserved_gb": reserved_bytes / GIB,
        "vram/peak_gb": peak_bytes / GIB,
    }
    used = device_used_bytes if device_used_bytes is not None else reserved_bytes
    if device_used_bytes is not None:
        metrics["vram/device_used_gb"] = device_used_bytes / GIB
    if device_total_bytes:
        metrics["vram/device_total_gb"] = device_total_bytes / GIB
        metrics["vram/device_used_fraction"] = used / device_total_bytes
    return MemoryReading("cuda", metrics, used, device_total_bytes or None)


def cpu_reading(rss_bytes: int, peak_rss_bytes: int, host_total_bytes: int | None) -> MemoryReading:
    """Metrics of the process's resident memory against the machine's RAM."""
    metrics = {"memory/rss_gb": rss_bytes / GIB, "memory/peak_rss_gb": max(peak_rss_bytes, rss_bytes) / GIB}
    if host_total_bytes:
        metrics["memory/host_total_gb"] = host_total_bytes / GIB
        metrics["memory/rss_fraction"] = rss_bytes / host_total_bytes
    return MemoryReading("cpu", metrics, rss_bytes, host_total_bytes or None)


def crossed_threshold(reading: MemoryReading, threshold_fraction: float) -> bool:
    """True when the usage is known and above ``threshold_fraction`` of the total."""
    fraction = reading.used_fraction
    return fraction is not None and fraction > threshold_fraction


def warning_text(reading: MemoryReading, threshold_fraction: float) -> str:
    what = "GPU memory" if reading.kind == "cuda" else "resident memory of this process"
    fraction = reading.used_fraction or 0.0
    return (
        f"{what} is at {fraction:.0%} ({reading.short_text()}), above the {threshold_fraction:.0%} warning threshold: "
        "the run may die of out-of-memory. Consider a smaller batch size, network or replay buffer."
    )


# --- reading the machine (impure, called only on logging batches) ----------------------------------------------


def process_rss_bytes() -> int:
    """Resident set size now: one small read of /proc/self/statm (Linux), else the peak as a stand-in."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return process_peak_rss_bytes()


def process_peak_rss_bytes() -> int:
    """Peak resident memory of this process; ``ru_maxrss`` is KiB on Linux and bytes on macOS."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def host_total_bytes() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def read_cpu_memory() -> MemoryReading:
    return cpu_reading(process_rss_bytes(), process_peak_rss_bytes(), host_total_bytes())


def cuda_device_used_bytes(device: torch.device) -> tuple[int, int, str]:
    """Used and total memory of the whole device, and the source: NVML if ``nvidia-ml-py`` is installed."""
    total = torch.cuda.get_device_properties(device).total_memory
    try:
        return int(torch.cuda.device_memory_used(device)), int(total), "NVML"
    except Exception:  # nvidia-ml-py missing or NVML unusable (containers, MIG): the driver's figure is the same
        free, total = torch.cuda.mem_get_info(device)
        return int(total - free), int(total), "cudaMemGetInfo"


def read_cuda_memory(device: torch.device) -> tuple[MemoryReading, str]:
    used, total, source = cuda_device_used_bytes(device)
    reading = cuda_reading(
        torch.cuda.memory_allocated(device),
        torch.cuda.memory_reserved(device),
        torch.cuda.max_memory_allocated(device),
        used,
        total,
    )
    return reading, source


def read_memory(device: torch.device) -> tuple[MemoryReading, str]:
    """The memory that can run out for a run on ``device``, and a sentence saying what was measured."""
    if device.type == "cuda":
        reading, source = read_cuda_memory(device)
        name = torch.cuda.get_device_name(device)
        return reading, f"CUDA memory of {device} ({name}): torch allocator + device used/total via {source}"
    return read_cpu_memory(), "process resident memory (RSS from /proc/self/statm, peak from getrusage) vs host RAM"


class VRAMMonitor(pl.Callback):
    """Logs GPU memory (or process RSS on a CPU) every ``log_every_n_steps`` training batches.

    Args:
        log_every_n_steps: read and log every this many training batches (None: the Trainer's
            ``log_every_n_steps``). NVML and /proc reads cost microseconds to milliseconds, so they
            are kept off the other batches.
        threshold_fraction: warn once when the used fraction of the device (RAM on CPU) passes this.
    """

    def __init__(self, log_every_n_steps: int | None = None, threshold_fraction: float = 0.9) -> None:
        if log_every_n_steps is not None and log_every_n_steps < 1:
            raise ConfigError(f"vram.log_every_n_steps must be >= 1 or null, got {log_every_n_steps}")
        if not 0.0 < threshold_fraction <= 1.0:
            raise ConfigError(f"vram.threshold_fraction must be in (0, 1], got {threshold_fraction}")
        self.log_every_n_steps = log_every_n_steps
        self.threshold_fraction = threshold_fraction
        self.latest: MemoryReading | None = None
        self.measures: str | None = None
        self.warned = False
        self._batches_seen = 0

    def _interval(self, trainer: pl.Trainer) -> int:
        return self.log_every_n_steps or max(1, trainer.log_every_n_steps)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._batches_seen = 0
        self._observe(trainer, pl_module)
        if pl_module.device.type == "cuda":  # on a CPU the mem/ figures are the process's RAM: nothing to explain
            rank_zero_info(f"VRAMMonitor measures {self.measures}")

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self._batches_seen += 1
        if self._batches_seen % self._interval(trainer) == 0:
            self._observe(trainer, pl_module)

    def _observe(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.latest, self.measures = read_memory(trainer.strategy.root_device)
        if trainer.is_global_zero:
            for logger in trainer.loggers:
                logger.log_metrics(self.latest.metrics, step=trainer.global_step)
        if not self.warned and crossed_threshold(self.latest, self.threshold_fraction):
            self.warned = True
            rank_zero_warn(warning_text(self.latest, self.threshold_fraction))
