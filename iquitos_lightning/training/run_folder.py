"""One run per folder: a new ``fit`` never writes beside the checkpoints of an earlier run.

Why: running the same ``fit`` twice wrote ``last-v1.ckpt`` and ``frames=336-v1.ckpt`` beside the first
run's files while ``last.ckpt`` still pointed at the first run, so a later ``--ckpt_path last`` resumed the
wrong one, and the logs, the W&B runs and the report of two runs mixed in one folder. Now a ``fit``
without ``--ckpt_path`` whose checkpoint folder already holds checkpoints is refused with one line naming
the two ways on: resume the earlier run (``--ckpt_path last``) or start a fresh one with ``--run.new``,
which moves the earlier run's folder aside to ``<folder>-old-<n>`` (nothing is deleted).
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


def claim_run_folder(checkpoint_dir: Path, run_root: Path | None, *, new: bool) -> list[tuple[Path, Path]]:
    """Make the run's folders free for a fresh ``fit``; returns the ``(from, to)`` moves made.

    Without ``new``: refuses (:class:`ConfigError`) when ``checkpoint_dir`` holds checkpoints. With ``new``:
    moves the run folder ``run_root`` aside, and the checkpoint folder too when it lies outside the run folder.
    """
    earlier = sorted(path.name for path in checkpoint_dir.glob("*.ckpt")) if checkpoint_dir.is_dir() else []
    folders = [run_root] if run_root is not None else []
    if run_root is None or not checkpoint_dir.resolve().is_relative_to(run_root.resolve()):
        folders.append(checkpoint_dir)
    if not new:
        if earlier:
            shown = ", ".join(earlier[:3]) + (", ..." if len(earlier) > 3 else "")
            raise ConfigError(
                f"{checkpoint_dir} already holds the checkpoints of an earlier run ({shown}): resume it with "
                f"--ckpt_path last, or start a fresh run with --run.new (moves {folders[0]} aside to "
                f"{aside_path(folders[0])}; nothing is deleted)"
            )
        return []
    moves = []
    for folder in folders:
        if folder.exists():
            moves.append((folder, aside_path(folder)))
            folder.rename(moves[-1][1])
    return moves
