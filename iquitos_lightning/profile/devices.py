"""Adapt GPU-only Trainer settings to the machine at hand, once, with one clear line.

Why: the RTX 4060 profiles ask for ``16-mixed`` or ``bf16-mixed``; on a CPU-only machine Lightning would run
16-mixed as bf16-mixed with a warning, bf16-mixed runs slower than 32-true there (measured: the card's SAC 0.89x
the frames/s on the 2-core CPU) and ``16-true``/``bf16-true`` crash. A config written for the laptop should
still run on the CI machine: its half precisions fall back to ``32-true`` and say so, and its bf16-mixed falls
back to ``16-mixed`` on a GPU older than Ampere (a precision typed on the command line is kept where it runs);
an explicit ``accelerator: gpu`` on a machine without CUDA is refused with what to write instead (``auto`` picks
the GPU when there is one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GPU_ACCELERATORS = ("gpu", "cuda")
CPU_FALLBACK_PRECISION = "32-true"
HALF_PRECISIONS = {"16", "16-mixed", "16-true", "bf16-true", "half"}  # never run as asked on a CPU
BF16_MIXED = {"bf16-mixed", "bf16"}  # runs on a CPU, slower: kept only when typed on the command line
GPU_PROFILE_PRECISIONS = HALF_PRECISIONS | BF16_MIXED


class AcceleratorUnavailable(ValueError):
    """The config asks for an accelerator this machine does not have."""


@dataclass(frozen=True)
class TrainerDevice:
    accelerator: str
    precision: str | None
    note: str | None  # what was changed and why (None: nothing changed)


def adapt_to_machine(
    accelerator: str | None,
    precision: str | int | None,
    cuda_available: bool,
    precision_typed: bool = True,
    cuda_capability: tuple[int, int] | None = None,
) -> TrainerDevice:
    """The accelerator and precision to run with on this machine, and a note when they differ from the config.

    ``precision_typed``: the precision was typed on the command line (a config file's bf16-mixed falls back on a
    CPU, and to 16-mixed on a GPU older than Ampere, ``cuda_capability`` < 8.0, which has no bf16 tensor cores;
    a typed one is what the user asked for, and it runs)."""
    accelerator = str(accelerator or "auto").lower()
    precision_text = None if precision is None else str(precision)
    if cuda_available:
        if precision_text in BF16_MIXED and not precision_typed and cuda_capability and cuda_capability < (8, 0):
            fallback = "16-mixed" if cuda_capability >= (7, 0) else CPU_FALLBACK_PRECISION
            note = (
                f"compute capability {cuda_capability[0]}.{cuda_capability[1]} has no bf16 tensor cores: precision "
                f"{precision_text!r} falls back to {fallback!r}"
            )
            return TrainerDevice(accelerator, fallback, note)
        return TrainerDevice(accelerator, precision_text, None)
    if accelerator in GPU_ACCELERATORS:
        raise AcceleratorUnavailable(
            f"trainer.accelerator={accelerator!r} but this machine has no CUDA device; use "
            "--trainer.accelerator auto (picks the GPU when present) or --trainer.accelerator cpu"
        )
    if precision_text in HALF_PRECISIONS or (precision_text in BF16_MIXED and not precision_typed):
        note = (
            f"no CUDA device: precision {precision_text!r} falls back to {CPU_FALLBACK_PRECISION!r} on the CPU "
            "(half precision gains nothing there and 16-true/bf16-true do not run)"
        )
        return TrainerDevice(accelerator, CPU_FALLBACK_PRECISION, note)
    return TrainerDevice(accelerator, precision_text, None)


# SAC updates/s on the 2-core development CPU (docs/performance.md): 256x256 networks, and 64x64 ones (the card's).
SAC_CPU_UPDATES_PER_S = (50.0, 90.0)
SAC_CPU_UPDATES_PER_S_SMALL = (60.0, 120.0)
SMALL_WIDTH = 64


def config_value(section: Any, key: str) -> Any:
    """A key of a config section, whether jsonargparse gave a Namespace or a dict."""
    return section.get(key) if isinstance(section, Mapping) else getattr(section, key, None)


def cpu_duration_hint(model: Any) -> str:
    """What a GPU profile asked, in frames and, for SAC, in hours on a 2-core CPU (empty when unknown).

    Why: run on the CPU, the RTX 4060 SAC profile became a 5 h 44 min run that nobody asked for; the refusal
    says what the user would have waited for. The estimate counts SAC's updates only (its learner sets the pace).
    """
    init_args = config_value(model, "init_args") or {}
    frames = config_value(config_value(init_args, "rollout") or {}, "frame_budget")
    if not frames:
        return ""
    hint = f" (it asks for {int(frames):,} frames"
    if str(config_value(model, "class_path") or "").endswith("SAC"):
        updates = int(frames) * float(config_value(init_args, "updates_per_frame") or 1.0)
        widths = [int(width) for width in config_value(init_args, "hidden_sizes") or [256]]
        small = max(widths) <= SMALL_WIDTH
        rates = SAC_CPU_UPDATES_PER_S_SMALL if small else SAC_CPU_UPDATES_PER_S
        fast, slow = (updates / rate / 3600 for rate in sorted(rates, reverse=True))
        size = f"{SMALL_WIDTH}x{SMALL_WIDTH}" if small else "256x256"
        hint += (
            f": {updates:,.0f} SAC updates, about {fast:.1f}-{slow:.1f} h on a 2-core CPU at the "
            f"{rates[0]:.0f}-{rates[1]:.0f} updates/s measured for {size} networks"
        )
    return hint + ")"


def cpu_profile_for(config: str) -> str | None:
    """The ``*_cpu.yaml`` beside a ``*_rtx4060.yaml`` GPU profile: what a user without the GPU runs instead (None
    when ``config`` is no such profile or has no CPU twin)."""
    path = Path(config)
    if "_rtx4060" not in path.name:
        return None
    twin = path.with_name(path.name.replace("_rtx4060", "_cpu"))
    return str(twin) if twin.exists() else None


def refuse_gpu_profile_without_cuda(
    precision: str | int | None,
    config_files: list[str],
    typed_keys: set[str],
    cuda_available: bool,
    model: Any = None,
) -> None:
    """A config file written for a GPU (half precision) started where there is no CUDA device stops at once.

    Why: run on the CPU, the RTX 4060 profile (then 256x256 networks, a 1M buffer) quietly became a run of hours.
    It continues when the user typed ``--trainer.accelerator cpu`` (or the precision) on the command line.
    """
    if cuda_available or {"trainer.accelerator", "trainer.precision"} & typed_keys:
        return
    if str(precision) not in GPU_PROFILE_PRECISIONS:
        return
    alternatives = [cpu for name in config_files if (cpu := cpu_profile_for(name)) is not None]
    instead = f"--config {alternatives[0]}" if alternatives else "--profile auto"
    raise AcceleratorUnavailable(
        f"{' '.join(config_files) or 'this config'} is a GPU profile (precision {precision}) and this machine has "
        f"no CUDA device: use {instead}, or add --trainer.accelerator cpu to run it on the CPU anyway "
        f"(slowly){cpu_duration_hint(model) if model is not None else ''}"
    )
