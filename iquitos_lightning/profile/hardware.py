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
# Cap on this process's CUDA memory, in GiB: a large GPU stands in for a smaller one (the 8 GB RTX 4060 on an
# H100): torch's allocator refuses beyond it and the device reads as that size to the profiles and checks.
MEMORY_CAP_ENV = "IQUITOS_GPU_MEMORY_CAP_GIB"


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


def memory_cap_bytes() -> int | None:
    """The CUDA memory cap set by ``IQUITOS_GPU_MEMORY_CAP_GIB``, in bytes (None: no cap)."""
    text = os.environ.get(MEMORY_CAP_ENV, "").strip()
    if not text:
        return None
    try:
        cap = float(text)
    except ValueError:
        raise ValueError(f"{MEMORY_CAP_ENV}={text!r}: give the cap in GiB, e.g. 8") from None
    if cap <= 0:
        raise ValueError(f"{MEMORY_CAP_ENV}={text!r}: the cap must be positive")
    return int(cap * GIB)


def apply_memory_cap() -> int | None:
    """Limit this process's CUDA allocator to ``IQUITOS_GPU_MEMORY_CAP_GIB`` (when set and CUDA is present).

    Why: ``torch.cuda.set_per_process_memory_fraction`` makes the allocator raise the same
    out-of-memory error a card of that size would, so a profile's fit, its estimate and the OOM
    handling can be checked for an 8 GB laptop card on any larger GPU. Returns the cap in bytes.
    """
    import torch  # lazy: as in detect_device, only touching the device needs torch

    cap = memory_cap_bytes()
    if cap is None or not torch.cuda.is_available():
        return None
    index = torch.cuda.current_device()
    total = torch.cuda.get_device_properties(index).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total), index)
    return min(cap, int(total))


def cuda_free_and_total_bytes(index: int) -> tuple[int, int]:
    """Free and total memory of CUDA device ``index`` as this process may use it (the cap applied when set)."""
    import torch  # lazy: as in detect_device, only touching the device needs torch

    free, total = torch.cuda.mem_get_info(index)
    cap = memory_cap_bytes()
    if cap is not None and cap < total:
        return min(free, max(cap - torch.cuda.memory_reserved(index), 0)), cap
    return int(free), int(total)


def detect_device(prefer_cuda: bool = True) -> DeviceInfo:
    """Read the machine: the first CUDA device when present (and preferred), else the CPU.

    Under ``IQUITOS_GPU_MEMORY_CAP_GIB`` the device reads as that size: total is the cap and free is
    what the cap leaves after this process's own reserved memory (or the device's free memory if lower).
    """
    import torch  # lazy: a DeviceInfo is described and compared without torch; only reading the device needs it

    host_total, host_available = _host_memory()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if prefer_cuda and torch.cuda.is_available():
        index = torch.cuda.current_device()
        properties = torch.cuda.get_device_properties(index)
        free, total = cuda_free_and_total_bytes(index)
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
