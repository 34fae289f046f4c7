"""Crash-safe checkpoint files: a killed process or a full disk never corrupts the last good one.

Why not Lightning's default: it writes through an fsspec transaction (a temp file moved into
place) but never fsyncs, so a power cut can leave a zero-length "complete" file, and a full or
read-only disk surfaces as a stack trace from deep inside torch/fsspec. Here every checkpoint is
serialised in memory first, written to a temporary file in the same folder, flushed to disk and
only then renamed over the target (``os.replace`` is atomic on POSIX), so the previous file stays
intact until the new one is complete. Failures raise :class:`CheckpointWriteError` naming the
path, the cause and what to do.
"""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

TEMP_SUFFIX = ".partial"


class CheckpointWriteError(OSError):
    """A checkpoint could not be written; the previous checkpoint on disk is untouched."""


class CheckpointReadError(RuntimeError):
    """A checkpoint file exists but cannot be loaded (truncated, not a checkpoint, wrong format)."""


_ERRNO_ADVICE = {
    errno.ENOSPC: "the disk is full: free space or point the run elsewhere (--trainer.default_root_dir)",
    errno.EDQUOT: "the disk quota is exceeded: free space or point the run elsewhere (--trainer.default_root_dir)",
    errno.EROFS: "the file system is read-only: choose a writable --trainer.default_root_dir",
    errno.EACCES: "permission denied: choose a writable --trainer.default_root_dir",
    errno.EPERM: "permission denied: choose a writable --trainer.default_root_dir",
}


def write_atomically(data: bytes, path: str | Path) -> None:
    """Write ``data`` to ``path`` so that ``path`` is either the old file or the complete new one."""
    path = Path(path)
    temporary = path.with_name(f"{path.name}.{os.getpid()}{TEMP_SUFFIX}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
        _fsync_directory(path.parent)
    except OSError as error:
        _remove_quietly(temporary)
        advice = _ERRNO_ADVICE.get(error.errno or 0, "check that the folder exists and is writable")
        previous = "the previous checkpoint there is intact" if path.exists() else "no previous checkpoint was there"
        raise CheckpointWriteError(
            error.errno, f"cannot write checkpoint {path}: {error.strerror or error}; {advice} ({previous})"
        ) from error


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (a crash right after os.replace must not undo it)."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def remove_stale_partials(directory: str | Path) -> list[Path]:
    """Delete temp files left by a process killed mid-write; returns what was removed."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    stale = sorted(directory.glob(f"*{TEMP_SUFFIX}"))
    for partial in stale:
        partial.unlink(missing_ok=True)
    return stale


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
            raise FileNotFoundError(f"checkpoint not found: {path}")
        try:
            return torch.load(path, map_location=map_location or "cpu", weights_only=False)
        except (RuntimeError, EOFError, OSError, ValueError) as error:
            raise CheckpointReadError(
                f"checkpoint {path} cannot be loaded ({type(error).__name__}: {error}); it may be truncated "
                "or not a checkpoint of this project: use another one (e.g. the previous periodic checkpoint)"
            ) from error

    def remove_checkpoint(self, path: Any) -> None:
        Path(path).unlink(missing_ok=True)
