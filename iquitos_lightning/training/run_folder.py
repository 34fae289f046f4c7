"""One run per folder: a new ``fit`` never writes beside the checkpoints of an earlier run.

Why: running the same ``fit`` twice wrote ``last-v1.ckpt`` and ``frames=336-v1.ckpt`` beside the first
run's files while ``last.ckpt`` still pointed at the first run, so a later ``--ckpt_path last`` resumed the
wrong one, and the logs, the W&B runs and the report of two runs mixed in one folder. Now a ``fit``
without ``--ckpt_path`` whose checkpoint folder already holds checkpoints is refused with one line naming
the ways on: resume the earlier run (``--ckpt_path last``), start a fresh one with ``--run.new``, which moves
the earlier run's folder aside to ``<folder>-old-<n>`` (nothing is deleted), or, where the checkpoint folder
follows the run's name, give the new run a folder of its own with ``--run.name NAME``.

One name decides a run's folder: ``--run.name NAME`` (or ``--trainer.logger.init_args.name NAME``) puts the logs,
the checkpoints (``checkpoint.dirpath`` is derived from the logger's ``<save_dir>/<name>`` when not set, and the
profiles leave it unset) and the report under ``<save_dir>/NAME``. A profile that fixed
``checkpoint.dirpath: runs/<profile>/checkpoints`` kept the checkpoints in the profile's folder when the logger's
name changed, and the refusal then named that folder and offered to move the renamed, empty one aside.

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
    """The run's name, and what ``fit`` does when the run's folder already holds an earlier run."""

    name: str | None = None  # the run's folder <save_dir>/NAME: logs, checkpoints, report (default: the logger's name)
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


def claim_run_folder(
    checkpoint_dir: Path, run_root: Path | None, *, new: bool, follows_name: bool = False
) -> list[Path]:
    """Check the run's folders for a fresh ``fit``, before anything is built; returns the earlier run's folders.

    Without ``new``: refuses (:class:`ConfigError`) when ``checkpoint_dir`` holds checkpoints, else returns [].
    The refusal names the folders ``--run.new`` would move (those holding files) and, when ``follows_name`` (the
    checkpoint folder is ``run_root/checkpoints`` because the run's name put it there), ``--run.name``.
    With ``new``: the run folder ``run_root`` and the checkpoint folder outside it (if so) that hold files now,
    for :func:`move_aside` to move once the run starts; an absent or empty folder is not an earlier run.
    """
    earlier = sorted(path.name for path in checkpoint_dir.glob("*.ckpt")) if checkpoint_dir.is_dir() else []
    folders = run_folders(checkpoint_dir, run_root)
    if not new:
        if earlier:
            shown = ", ".join(earlier[:3]) + (", ..." if len(earlier) > 3 else "")
            held = [folder for folder in folders if holds_files(folder)]
            moves = " and ".join(f"{folder} aside to {aside_path(folder)}" for folder in held or folders[:1])
            ways = [
                "resume it with --ckpt_path last",
                f"start a fresh run with --run.new (moves {moves}; nothing is deleted)",
            ]
            if follows_name and run_root is not None:
                ways.append(f"give this run a folder of its own with --run.name NAME ({run_root.parent}/NAME)")
            raise ConfigError(
                f"{checkpoint_dir} already holds the checkpoints of an earlier run ({shown}): "
                + ", ".join(ways[:-1])
                + f", or {ways[-1]}"
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
