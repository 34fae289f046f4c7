"""Crash-safe checkpoint files: a killed process or a full disk never corrupts the last good one.

Why not Lightning's default: it writes through an fsspec transaction (a temp file moved into
place) but never fsyncs, so a power cut can leave a zero-length "complete" file, and a full or
read-only disk surfaces as a stack trace from deep inside torch/fsspec. Here every checkpoint is
serialised in memory first, written to a temporary file in the same folder, flushed to disk and
only then renamed over the target (``os.replace`` is atomic on POSIX), so the previous file stays
intact until the new one is complete (:mod:`iquitos_lightning.atomic_files`). Failures raise
:class:`CheckpointWriteError` naming the path, the cause and what to do; an unreadable or missing
checkpoint raises :class:`CheckpointReadError`, a config error (exit status 2).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from iquitos_lightning.atomic_files import (  # noqa: F401 - re-exported: the checkpoint API in one place
    TEMP_SUFFIX,
    CheckpointWriteError,
    remove_stale_partials,
    write_atomically,
)
from iquitos_lightning.errors import ConfigError


class CheckpointReadError(ConfigError, RuntimeError):
    """A checkpoint file exists but cannot be loaded (truncated, not a checkpoint, wrong format)."""


class SafeCheckpointIO(TorchCheckpointIO):
    """Lightning CheckpointIO plugin: atomic, fsynced writes and clear read/write errors."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options")
        buffer = io.BytesIO()
        torch.save(checkpoint, buffer)
        write_atomically(buffer.getbuffer(), path)

    def load_checkpoint(self, path: Any, map_location: Any = None, weights_only: bool | None = None) -> dict[str, Any]:
        path = Path(path)
        if not path.is_file():
            raise CheckpointReadError(
                f"--ckpt_path: checkpoint not found: {path}; give an existing .ckpt file, or 'last' to resume "
                "from the last checkpoint of the run's checkpoint folder"
            )
        try:
            return torch.load(path, map_location=map_location or "cpu", weights_only=False)
        except (RuntimeError, EOFError, OSError, ValueError) as error:
            raise CheckpointReadError(
                f"checkpoint {path} cannot be loaded ({type(error).__name__}: {error}); it may be truncated "
                "or not a checkpoint of this project: use another one (e.g. the previous periodic checkpoint)"
            ) from error

    def remove_checkpoint(self, path: Any) -> None:
        Path(path).unlink(missing_ok=True)
