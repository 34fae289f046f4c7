"""Adapt GPU-only Trainer settings to the machine at hand, once, with one clear line.

Why: the RTX 4060 profiles ask for ``16-mixed``; on a CPU-only machine Lightning would run it as
bf16-mixed with a warning (no gain on a CPU: measured, bf16 autocast sped up no SAC update) and
``16-true``/``bf16-true`` crash there. A config written for the laptop should still run on the CI
machine: half precisions fall back to ``32-true`` and say so; an explicit ``accelerator: gpu`` on a
machine without CUDA is refused with what to write instead (``auto`` picks the GPU when there is
one).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

GPU_ACCELERATORS = ("gpu", "cuda")
CPU_FALLBACK_PRECISION = "32-true"
HALF_PRECISIONS = {"16", "16-mixed", "16-true", "bf16-true", "half"}


class AcceleratorUnavailable(ValueError):
    """The config asks for an accelerator this machine does not have."""


@dataclass(frozen=True)
class TrainerDevice:
    accelerator: str
    precision: str | None
    note: str | None  # what was changed and why (None: nothing changed)


def adapt_to_machine(accelerator: str | None, precision: str | int | None, cuda_available: bool) -> TrainerDevice:
    """The accelerator and precision to run with on this machine, and a note when they differ from the config."""
    accelerator = str(accelerator or "auto").lower()
    precision_text = None if precision is None else str(precision)
    if cuda_available:
        return TrainerDevice(accelerator, precision_text, None)
    if accelerator in GPU_ACCELERATORS:
        raise AcceleratorUnavailable(
            f"trainer.accelerator={accelerator!r} but this machine has no CUDA device; use "
            "--trainer.accelerator auto (picks the GPU when present) or --trainer.accelerator cpu"
        )
    if precision_text in HALF_PRECISIONS:
        note = (
            f"no CUDA device: precision {precision_text!r} falls back to {CPU_FALLBACK_PRECISION!r} on the CPU "
            "(half precision gains nothing there and 16-true/bf16-true do not run)"
        )
        return TrainerDevice(accelerator, CPU_FALLBACK_PRECISION, note)
    return TrainerDevice(accelerator, precision_text, None)


def refuse_gpu_profile_without_cuda(
    precision: str | int | None, config_files: list[str], typed_keys: set[str], cuda_available: bool
) -> None:
    """A config file written for a GPU (half precision) started where there is no CUDA device stops at once.

    Why: run on the CPU, the RTX 4060 profile's 256x256 networks and 1M buffer quietly became a run of hours.
    It continues when the user typed ``--trainer.accelerator cpu`` (or the precision) on the command line.
    """
    if cuda_available or {"trainer.accelerator", "trainer.precision"} & typed_keys:
        return
    if str(precision) not in HALF_PRECISIONS:
        return
    alternatives = [
        str(Path(name).with_name(Path(name).name.replace("_rtx4060", "_cpu")))
        for name in config_files
        if "_rtx4060" in Path(name).name and Path(name).with_name(Path(name).name.replace("_rtx4060", "_cpu")).exists()
    ]
    instead = f"--config {alternatives[0]}" if alternatives else "--profile auto"
    raise AcceleratorUnavailable(
        f"{' '.join(config_files) or 'this config'} is a GPU profile (precision {precision}) and this machine has "
        f"no CUDA device: use {instead}, or add --trainer.accelerator cpu to run it on the CPU anyway (slowly)"
    )
