"""``ModelCheckpoint`` whose files are never lost mid-write: ``last`` swapped atomically, old files removed after.

What it overrides: seven private methods of Lightning's ``ModelCheckpoint`` (2.6):
- ``_save_topk_checkpoint`` and ``_save_last_checkpoint``, called together by :meth:`save_checkpoints` (a save at
  any moment the subclass chooses, e.g. every N environment frames);
- ``_remove_checkpoint``: during such a save, the file a new one replaces is removed only after ``last`` points
  at the new one, so ``last`` always resolves to a complete file;
- ``_link_checkpoint``: the ``last`` link is a new link renamed over the old one (Lightning removes the old
  link first, leaving a moment with no ``last``); a copy where the filesystem has no symlinks;
- ``_find_last_checkpoints``: ``--ckpt_path last`` ignores a dangling ``last`` (left by an older writer) and
  falls back to the newest complete checkpoint in the folder;
- ``_monitor_candidates``: adds the subclass's :meth:`extra_candidates` (``{frames}`` in the filename);
- ``_save_checkpoint`` (the one call that writes a file): inside the subclass's :meth:`saving` context, so a
  subclass can say what its files leave out (``best.ckpt``: the replay buffer).

Checked at import: ``ModelCheckpoint`` still has the seven methods; on construction, ``_last_checkpoint_saved``.
Equivalence and safety tests: ``tests/fastpath/test_model_checkpoint.py`` (same files as Lightning's own for a
plain run) and ``tests/robustness/test_crash_and_interrupt.py`` (kill -9, Ctrl-C).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities import rank_zero_warn

from iquitos_lightning.atomic_files import TEMP_SUFFIX
from iquitos_lightning.fastpath.pins import require

OVERRIDDEN = (
    "_save_topk_checkpoint",
    "_save_last_checkpoint",
    "_remove_checkpoint",
    "_link_checkpoint",
    "_find_last_checkpoints",
    "_monitor_candidates",
    "_save_checkpoint",
)
require(ModelCheckpoint, OVERRIDDEN, library="lightning", override=__name__)


class AtomicModelCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` with crash-safe file handling (module docstring) and :meth:`save_checkpoints`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        require(self, ["_last_checkpoint_saved"], library="lightning", override=__name__)
        self._deferred_removals: list[str] | None = None

    def extra_candidates(self, trainer: pl.Trainer) -> dict[str, torch.Tensor]:
        """Values the filename template may use besides the logged metrics (none here)."""
        return {}

    @contextmanager
    def saving(self, trainer: pl.Trainer) -> Iterator[None]:
        """Around each file this callback writes (nothing here; a subclass may mark the module meanwhile)."""
        yield

    def save_checkpoints(self, trainer: pl.Trainer) -> None:
        """Save the top-k file and ``last`` now; remove the files they replace only afterwards."""
        candidates = self._monitor_candidates(trainer)
        self._deferred_removals = []
        try:
            self._save_topk_checkpoint(trainer, candidates)
            self._save_last_checkpoint(trainer, candidates)
        finally:
            removals, self._deferred_removals = self._deferred_removals, None
        for path in removals:
            super()._remove_checkpoint(trainer, path)

    def last_saved_path(self) -> str:
        """The ``last`` checkpoint if there is one, else the file saved last."""
        return self.last_model_path or self._last_checkpoint_saved

    # ----- crash safety of the files --------------------------------------------------------------
    def _remove_checkpoint(self, trainer: pl.Trainer, filepath: str) -> None:
        if self._deferred_removals is not None:
            self._deferred_removals.append(filepath)  # after `last` points at the new file
        else:
            super()._remove_checkpoint(trainer, filepath)

    @staticmethod
    def _link_checkpoint(trainer: pl.Trainer, filepath: str, linkpath: str) -> None:
        """Point ``linkpath`` at ``filepath`` in one atomic rename (Lightning removes the old link first)."""
        if trainer.is_global_zero and os.path.abspath(filepath) != os.path.abspath(linkpath):
            temporary = f"{linkpath}.{os.getpid()}.link{TEMP_SUFFIX}"
            try:
                if os.path.lexists(temporary):
                    os.remove(temporary)
                os.symlink(os.path.relpath(filepath, os.path.dirname(linkpath)), temporary)
                os.replace(temporary, linkpath)
            except OSError:
                if os.path.lexists(temporary):
                    os.remove(temporary)
                ModelCheckpoint._link_checkpoint(trainer, filepath, linkpath)  # e.g. no symlinks: a copy
                return
        trainer.strategy.barrier()

    def _find_last_checkpoints(self, trainer: pl.Trainer) -> set[str]:
        """``last*.ckpt`` files that resolve to a file; if none, the newest complete checkpoint in the folder."""
        found = {path for path in super()._find_last_checkpoints(trainer) if os.path.exists(path)}
        if found or not self.dirpath or not os.path.isdir(self.dirpath):
            return found
        complete = [path for path in Path(self.dirpath).glob(f"*{self.FILE_EXTENSION}") if path.is_file()]
        if not complete:
            return set()
        newest = max(complete, key=lambda path: path.stat().st_mtime)
        rank_zero_warn(f"no usable 'last' checkpoint in {self.dirpath}: resuming from the newest one, {newest}")
        return {os.path.normpath(newest)}

    def _save_checkpoint(self, trainer: pl.Trainer, filepath: str) -> None:
        with self.saving(trainer):
            super()._save_checkpoint(trainer, filepath)

    def _monitor_candidates(self, trainer: pl.Trainer) -> dict[str, torch.Tensor]:
        return {**super()._monitor_candidates(trainer), **self.extra_candidates(trainer)}
