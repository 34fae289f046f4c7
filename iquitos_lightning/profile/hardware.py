"""What machine a run is on: the accelerator's name, memory and capabilities, or the CPU and RAM.

Why: the earlier project's users hand-edited batch and buffer sizes for an 8 GB laptop GPU until
it stopped running out of memory. Reading the device once, at start, lets the auto profiles pick
sizes that fit, and lets the free-memory check refuse a run before it dies mid-way.
Everything below :func:`detect_device` is a pure function of a :class:`DeviceInfo`, so the
choice for any described GPU can be tested on a CPU machine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class DeviceInfo:
    """One machine as the profile chooser sees it."""

    accelerator: str  # "cuda" or "cpu"
    name: str
    total_memory_bytes: int  # device memory on CUDA, physical RAM on CPU
    free_memory_bytes: int
    host_ram_bytes: int
    host_available_bytes: int
    cpu_cores: int
    compute_capability: tuple[int, int] | None = None  # CUDA only

    @property
    def supports_bf16(self) -> bool:
        """bf16 tensor cores exist from Ampere (compute capability 8.0) on."""
        return self.accelerator == "cuda" and self.compute_capability is not None and self.compute_capability >= (8, 0)

    @property
    def supports_tf32(self) -> bool:
        return self.supports_bf16

    @property
    def total_memory_gib(self) -> float:
        return self.total_memory_bytes / GIB


def _host_memory() -> tuple[int, int]:
    """Physical and available RAM from /proc/meminfo (no psutil dependency)."""
    total = available = 0
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                key, value = line.split(":", 1)
                if key == "MemTotal":
                    total = int(value.split()[0]) * 1024
                elif key == "MemAvailable":
                    available = int(value.split()[0]) * 1024
    except OSError:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        total = available = pages
    return total, available or total


def detect_device(prefer_cuda: bool = True) -> DeviceInfo:
    """Read the machine: the first CUDA device when present (and preferred), else the CPU."""
    import torch  # lazy: a DeviceInfo is described and compared without torch; only reading the device needs it

    host_total, host_available = _host_memory()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if prefer_cuda and torch.cuda.is_available():
        index = torch.cuda.current_device()
        properties = torch.cuda.get_device_properties(index)
        free, total = torch.cuda.mem_get_info(index)
        return DeviceInfo(
            accelerator="cuda",
            name=properties.name,
            total_memory_bytes=int(total),
            free_memory_bytes=int(free),
            host_ram_bytes=host_total,
            host_available_bytes=host_available,
            cpu_cores=cores,
            compute_capability=(properties.major, properties.minor),
        )
    return DeviceInfo(
        accelerator="cpu",
        name=f"CPU ({cores} cores)",
        total_memory_bytes=host_total,
        free_memory_bytes=host_available,
        host_ram_bytes=host_total,
        host_available_bytes=host_available,
        cpu_cores=cores,
    )


def device_class(device: DeviceInfo) -> str:
    """The profile class of a device: ``cpu``, ``gpu-8gb``, ``gpu-16gb`` or ``gpu-datacenter``.

    Bounds are on total memory with slack for what the driver and display keep: an "8 GB"
    laptop card reports about 7.6-8.6 GiB, a 16 GB card about 15-16 GiB, a 32 GB V100 about
    31.7 GiB. Cards under 12 GiB (8-11 GB) share the 8 GB class, 12-20 GiB the 16 GB class, and
    from 20 GiB (24 GB consumer cards, V100, A100, H100) the large/datacenter class.
    """
    if device.accelerator != "cuda":
        return "cpu"
    gib = device.total_memory_gib
    if gib < 12:
        return "gpu-8gb"
    if gib < 20:
        return "gpu-16gb"
    return "gpu-datacenter"
