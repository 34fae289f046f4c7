"""One run per folder: a new ``fit`` never writes beside the checkpoints of an earlier run.

Why: running the same ``fit`` twice wrote ``last-v1.ckpt`` and ``frames=336-v1.ckpt`` beside the first
run's files while ``last.ckpt`` still pointed at the first run, so a later ``--ckpt_path last`` resumed the
wrong one, and the logs, the W&B runs and the report of two runs mixed in one folder. Now a ``fit``
without ``--ckpt_path`` whose checkpoint folder already holds checkpoints is refused with one line naming
the two ways on: resume the earlier run (``--ckpt_path last``) or start a fresh one with ``--run.new``,
which moves the earlier run's folder aside to ``<folder>-old-<n>`` (nothing is deleted).

What is an earlier run is decided when the command line is read, before anything is built: building the loggers
creates the run folder (the W&B logger makes its ``save_dir``), so a folder seen only at ``fit`` time may be this
run's own, just made. Moved later, at ``fit`` time, are the folders that held files then; a folder that did not exist
or held no file is no earlier run and is simply used (the main job on a fresh clone said "--run.new: the earlier
run's runs/smoke is now runs/smoke-old-1" and left that empty folder behind).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from iquitos_lightning.errors import ConfigError


@dataclass
class RunOptions:
    """What ``fit`` does when the run's folder already holds an earlier run."""

    new: bool = False  # move the earlier run's folder aside to <folder>-old-<n> and start afresh (nothing deleted)


def aside_path(path: Path) -> Path:
    """The first free ``<path>-old-<n>`` (n = 1, 2, ...)."""
    n = 1
    while (candidate := path.with_name(f"{path.name}-old-{n}")).exists():
        n += 1
    return candidate


def run_folders(checkpoint_dir: Path, run_root: Path | None) -> list[Path]:
    """The folders a run writes: its run folder, and the checkpoint folder when it lies outside it."""
    folders = [run_root] if run_root is not None else []
    if run_root is None or not checkpoint_dir.resolve().is_relative_to(run_root.resolve()):
        folders.append(checkpoint_dir)
    return folders


def holds_files(folder: Path) -> bool:
    """True when ``folder`` holds a file (or a link) at any depth: what an earlier run leaves."""
    return folder.is_dir() and any(not path.is_dir() or path.is_symlink() for path in folder.rglob("*"))


def claim_run_folder(checkpoint_dir: Path, run_root: Path | None, *, new: bool) -> list[Path]:
    """Check the run's folders for a fresh ``fit``, before anything is built; returns the earlier run's folders.

    Without ``new``: refuses (:class:`ConfigError`) when ``checkpoint_dir`` holds checkpoints, else returns [].
    With ``new``: the run folder ``run_root`` and the checkpoint folder outside it (if so) that hold files now,
    for :func:`move_aside` to move once the run starts; an absent or empty folder is not an earlier run.
    """
    earlier = sorted(path.name for path in checkpoint_dir.glob("*.ckpt")) if checkpoint_dir.is_dir() else []
    folders = run_folders(checkpoint_dir, run_root)
    if not new:
        if earlier:
            shown = ", ".join(earlier[:3]) + (", ..." if len(earlier) > 3 else "")
            raise ConfigError(
                f"{checkpoint_dir} already holds the checkpoints of an earlier run ({shown}): resume it with "
                f"--ckpt_path last, or start a fresh run with --run.new (moves {folders[0]} aside to "
                f"{aside_path(folders[0])}; nothing is deleted)"
            )
        return []
    return [folder for folder in folders if holds_files(folder)]


def move_aside(folders: list[Path]) -> list[tuple[Path, Path]]:
    """Move each folder (those :func:`claim_run_folder` found) to its ``<folder>-old-<n>``; returns the moves."""
    moves = []
    for folder in folders:
        if folder.exists():
            moves.append((folder, aside_path(folder)))
            folder.rename(moves[-1][1])
    return moves
