"""Atomic file writes: a path holds either its previous content or the complete new one, never half.

Why a module of its own, free of torch: checkpoints (:mod:`iquitos_lightning.training.checkpoint_io`) and
reports (KPI rows, baseline tables, plots) all need it, and ``baselines`` must not import torch.
Data goes to a temporary file in the same folder, is flushed and fsynced, then renamed over the
target (``os.replace`` is atomic on POSIX) and the folder is fsynced so the rename survives a power
cut. A failure (disk full, read-only, no permission) raises :class:`CheckpointWriteError` naming the
path, the cause and what to do, and leaves the previous file intact.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from iquitos_lightning.errors import OutputWriteError

TEMP_SUFFIX = ".partial"


class CheckpointWriteError(OutputWriteError):
    """A checkpoint (or report) could not be written; the previous file on disk is untouched."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


_ELSEWHERE = "write elsewhere (--checkpoint.dirpath for checkpoints, --results for reports)"
_ERRNO_ADVICE = {
    errno.ENOSPC: f"the disk is full: free space or {_ELSEWHERE}",
    errno.EDQUOT: f"the disk quota is exceeded: free space or {_ELSEWHERE}",
    errno.EROFS: f"the file system is read-only: {_ELSEWHERE}",
    errno.EACCES: f"permission denied: {_ELSEWHERE}",
    errno.EPERM: f"permission denied: {_ELSEWHERE}",
}


def write_atomically(data: bytes | memoryview, path: str | Path, what: str = "checkpoint") -> None:
    """Write ``data`` to ``path`` so that ``path`` is either the old file or the complete new one.

    ``what`` names the file in the error ("checkpoint", "report").
    """
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
        previous = f"the previous {what} there is intact" if path.exists() else f"no previous {what} was there"
        raise CheckpointWriteError(
            error.errno, f"cannot write {what} {path}: {error.strerror or error}; {advice} ({previous})"
        ) from error


def ensure_writable_folder(folder: str | Path, what: str = "checkpoint") -> Path:
    """Create ``folder`` and prove it takes a file, so a read-only output fails before hours of work, not after."""
    folder = Path(folder)
    probe = folder / f".write-probe.{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        advice = _ERRNO_ADVICE.get(error.errno or 0, "check that the folder can be created")
        raise CheckpointWriteError(error.errno, f"cannot create the {what} folder {folder}: {advice}") from error
    write_atomically(b"", probe, what)
    _remove_quietly(probe)
    return folder


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
