"""Out-of-memory during training: save what was done, say what ran out and what would fit, exit non-zero.

Why: an OOM after hours of training otherwise loses everything since the last periodic checkpoint
and leaves a stack trace from deep inside torch. Lightning calls ``Callback.on_exception`` before it
tears down and re-raises; there :class:`OutOfMemoryHandler` writes ``emergency-oom.ckpt``
(``trainer.save_checkpoint``: weights, optimizers, loops and whatever the module's
``on_save_checkpoint`` adds, e.g. a replay buffer) to the checkpoint folder, prints a report
(device, peak memory, the sizes in force and the overrides that halve them) and attaches a short
note to the exception. If saving fails too, the report says so and the original error still
propagates.

Exit code: Lightning re-raises the error, so a plain script exits with status 1 and a traceback.
Entry points that want a distinct status wrap the run in :func:`exit_on_out_of_memory`, which turns
an OOM into ``SystemExit(OOM_EXIT_CODE)`` (3) after the report has been printed.

Contract with the LightningModule (optional, read with ``getattr``): ``oom_advice() -> dict[str,
object]`` returns the memory-driving sizes in force, e.g. ``{"batch_size": 256, "hidden_sizes":
[256, 256], "frames_per_batch": 1000}``; each integer (or list of integers) is proposed halved as
``--model.batch_size=128``. Keys containing a dot (``data.batch_size``) are used as the full
override path. Without ``oom_advice``, hyperparameters whose names contain ``batch_size`` or
``hidden`` are used.

Both CUDA out-of-memory (``torch.OutOfMemoryError``, alias ``torch.cuda.OutOfMemoryError``) and
the CPU allocator's ``RuntimeError`` ("DefaultCPUAllocator: can't allocate memory") are handled.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from iquitos_lightning.training.callbacks.vram import GIB, host_total_bytes, process_peak_rss_bytes

OOM_EXIT_CODE = 3
EMERGENCY_CHECKPOINT_NAME = "emergency-oom.ckpt"
CPU_OOM_MARKERS = ("DefaultCPUAllocator: can't allocate memory", "not enough memory")
HPARAM_SIZE_MARKERS = ("batch_size", "hidden")


def is_out_of_memory(exception: BaseException) -> bool:
    """True for CUDA OOM and for the CPU allocator's allocation failures."""
    if isinstance(exception, torch.OutOfMemoryError | MemoryError):
        return True
    return isinstance(exception, RuntimeError) and any(marker in str(exception) for marker in CPU_OOM_MARKERS)


def is_cuda_out_of_memory(exception: BaseException) -> bool:
    return isinstance(exception, torch.OutOfMemoryError) or "CUDA out of memory" in str(exception)


def _halved(value: object) -> object | None:
    """Half of a size (an int >= 2, or a list/tuple of them); None for anything that is not a size."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value // 2 if value >= 2 else None
    if isinstance(value, list | tuple) and value:
        halves = [_halved(item) for item in value]
        if all(isinstance(item, int) and not isinstance(item, bool) for item in value) and None not in halves:
            return halves
    return None


def _format_value(value: object) -> str:
    if isinstance(value, list | tuple):
        return "[" + ",".join(str(item) for item in value) + "]"
    return str(value)


def suggest_overrides(sizes: Mapping[str, object], prefix: str = "model.") -> list[str]:
    """CLI overrides that halve each size in force: ``{"batch_size": 256}`` -> ``["--model.batch_size=128"]``."""
    overrides = []
    for name, value in sizes.items():
        smaller = _halved(value)
        if smaller is None:
            continue
        path = name if "." in name else f"{prefix}{name}"
        overrides.append(f"--{path}={_format_value(smaller)}")
    return overrides


def sizes_in_force(pl_module: pl.LightningModule) -> dict[str, object]:
    """The module's ``oom_advice()`` if it has one, else its size-like hyperparameters."""
    advice = getattr(pl_module, "oom_advice", None)
    if callable(advice):
        try:
            return dict(advice())
        except Exception as error:  # the report must not fail because the advice did
            return {"oom_advice() failed": repr(error)}
    hparams: Mapping[str, Any] = getattr(pl_module, "hparams", {}) or {}
    return {name: value for name, value in hparams.items() if any(marker in name for marker in HPARAM_SIZE_MARKERS)}


@dataclass(frozen=True)
class OomFacts:
    """Everything the report states; built from the trainer and turned into text by :func:`format_oom_report`."""

    what_ran_out: str
    error_line: str
    peak_bytes: int | None
    total_bytes: int | None
    sizes: Mapping[str, object]
    overrides: list[str]
    checkpoint_path: Path | None
    checkpoint_error: str | None = None


def format_oom_report(facts: OomFacts) -> str:
    lines = ["", "=" * 72, f"OUT OF MEMORY: {facts.what_ran_out}", f"  error: {facts.error_line}"]
    if facts.peak_bytes is not None:
        total = f" of {facts.total_bytes / GIB:.2f} GiB" if facts.total_bytes else ""
        lines.append(f"  peak memory: {facts.peak_bytes / GIB:.2f} GiB{total}")
    if facts.sizes:
        lines.append("  sizes in force: " + ", ".join(f"{name}={value}" for name, value in facts.sizes.items()))
    if facts.checkpoint_error is not None:
        lines.append(f"  emergency checkpoint could NOT be saved to {facts.checkpoint_path}: {facts.checkpoint_error}")
    elif facts.checkpoint_path is not None:
        lines.append(f"  emergency checkpoint saved: {facts.checkpoint_path}")
    if facts.overrides:
        lines.append("  to fit, retry with smaller sizes, e.g.: " + " ".join(facts.overrides))
    else:
        lines.append("  to fit, retry with a smaller batch size or network (the module reported no sizes)")
    if facts.checkpoint_path is not None and facts.checkpoint_error is None:
        lines.append(f"  to resume where it stopped, add: --ckpt_path={facts.checkpoint_path}")
    lines.append("=" * 72)
    return "\n".join(lines)


def emergency_checkpoint_dir(trainer: pl.Trainer, dirpath: str | Path | None = None) -> Path:
    """Where to save: the explicit folder, else the checkpoint callback's folder, else ``default_root_dir``."""
    if dirpath is not None:
        return Path(dirpath)
    checkpoint_callback = trainer.checkpoint_callback
    callback_dir = getattr(checkpoint_callback, "dirpath", None)
    return Path(callback_dir) if callback_dir else Path(trainer.default_root_dir)


def _memory_figures(trainer: pl.Trainer, cuda_oom: bool) -> tuple[str, int | None, int | None]:
    """What ran out, its peak use and its size, read before any cache is emptied."""
    device = trainer.strategy.root_device
    if cuda_oom and device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        total = torch.cuda.get_device_properties(device).total_memory
        return f"GPU memory of {device} ({name})", torch.cuda.max_memory_allocated(device), total
    if cuda_oom:
        return f"GPU memory (the run's root device is {device}; no CUDA statistics there)", None, None
    return "host RAM of this process", process_peak_rss_bytes(), host_total_bytes()


class OutOfMemoryHandler(pl.Callback):
    """On an out-of-memory error: emergency checkpoint, report with overrides that would fit, then let it raise.

    Args:
        dirpath: folder of ``emergency-oom.ckpt`` (default: the ModelCheckpoint folder, else ``default_root_dir``).
        override_prefix: the config path of the module's arguments in the CLI (``model.`` for LightningCLI).
    """

    def __init__(self, dirpath: str | Path | None = None, override_prefix: str = "model.") -> None:
        self.dirpath = dirpath
        self.override_prefix = override_prefix
        self.last_report: str | None = None
        self.last_checkpoint: Path | None = None

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if not is_out_of_memory(exception):
            return
        cuda_oom = is_cuda_out_of_memory(exception)
        what, peak, total = _memory_figures(trainer, cuda_oom)
        sizes = sizes_in_force(pl_module)

        gc.collect()  # the step's temporaries are unreachable now; freeing them gives the save room
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        path = emergency_checkpoint_dir(trainer, self.dirpath) / EMERGENCY_CHECKPOINT_NAME
        checkpoint_error = None
        try:
            trainer.save_checkpoint(path)
            self.last_checkpoint = path
        except Exception as error:  # never mask the OOM with a save failure
            checkpoint_error = f"{type(error).__name__}: {error}"

        facts = OomFacts(
            what_ran_out=what,
            error_line=(str(exception).strip().splitlines() or [type(exception).__name__])[0],
            peak_bytes=peak,
            total_bytes=total,
            sizes=sizes,
            overrides=suggest_overrides(sizes, self.override_prefix),
            checkpoint_path=path,
            checkpoint_error=checkpoint_error,
        )
        self.last_report = format_oom_report(facts)
        if trainer.is_global_zero:
            print(self.last_report, file=sys.stderr, flush=True)
        saved = f"emergency checkpoint {path}" if checkpoint_error is None else "emergency checkpoint NOT saved"
        exception.add_note(f"[OutOfMemoryHandler] {saved}; try: {' '.join(facts.overrides) or 'smaller sizes'}")


@contextlib.contextmanager
def exit_on_out_of_memory(exit_code: int = OOM_EXIT_CODE) -> Iterator[None]:
    """Turn an out-of-memory error escaping the block into ``SystemExit(exit_code)``; other errors pass.

    Use around ``trainer.fit``/``LightningCLI(...)`` so scripts and schedulers can tell OOM (3) from
    other failures (1) without parsing the log; the report was already printed by the handler.
    """
    try:
        yield
    except Exception as error:
        # A refusal that carries its own exit status (e.g. "this buffer cannot fit", before anything ran) keeps it.
        if is_out_of_memory(error) and getattr(error, "exit_code", None) is None:
            print(f"exiting with status {exit_code}: out of memory ({type(error).__name__})", file=sys.stderr)
            raise SystemExit(exit_code) from error
        raise
