"""Periodic checkpoints counted in environment frames, plus ``last``, through Lightning's ``ModelCheckpoint``.

Why a subclass: Lightning counts checkpoint periods in optimizer steps (``global_step``: three per
SAC update, a varying number per PPO rollout) or epochs; an RL run is planned in env frames. This
callback saves after the training batch that crosses each multiple of ``every_n_frames`` and keeps
everything else of ``ModelCheckpoint`` (``dirpath``, ``save_top_k``, ``save_last``, the filename
template, which may use ``{frames}``). ``fit --ckpt_path last`` finds the ``last`` checkpoint in
``dirpath``: give a fixed ``dirpath`` (the configs use ``runs/<name>/checkpoints``) so a new run
version still finds it.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint


class FrameCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` that saves every ``every_n_frames`` environment frames (and ``last``)."""

    def __init__(
        self,
        every_n_frames: int = 100_000,
        dirpath: str | None = None,
        filename: str = "{frames}",
        save_top_k: int = 1,
        save_last: bool | str | None = "link",
        **kwargs: Any,
    ) -> None:
        if every_n_frames <= 0:
            raise ValueError(f"every_n_frames must be positive, got {every_n_frames}")
        kwargs.setdefault("every_n_epochs", 0)  # frames decide, not epochs
        super().__init__(dirpath=dirpath, filename=filename, save_top_k=save_top_k, save_last=save_last, **kwargs)
        self.every_n_frames = every_n_frames
        self._frames_at_last_save = 0

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        frames = int(getattr(pl_module, "frames_done", 0))
        if frames // self.every_n_frames <= self._frames_at_last_save // self.every_n_frames:
            return
        if trainer.fast_dev_run or trainer.sanity_checking:
            return
        self._frames_at_last_save = frames
        candidates = self._monitor_candidates(trainer)
        self._save_topk_checkpoint(trainer, candidates)
        self._save_last_checkpoint(trainer, candidates)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Re-save the checkpoint of these frames after the evaluation that follows it.

        An evaluation period ends on the same batch as a checkpoint period more often than not; the
        checkpoint was written before the evaluation ran, so without this the latest checkpoint would
        never hold the latest evaluation (its KPIs, the report's curve). Same frames, same file name.
        """
        frames = int(getattr(pl_module, "frames_done", -1))
        if trainer.sanity_checking or trainer.fast_dev_run or frames != self._frames_at_last_save or frames <= 0:
            return
        candidates = self._monitor_candidates(trainer)
        self._save_topk_checkpoint(trainer, candidates)
        self._save_last_checkpoint(trainer, candidates)

    def _monitor_candidates(self, trainer: pl.Trainer) -> dict[str, torch.Tensor]:
        candidates = super()._monitor_candidates(trainer)
        candidates["frames"] = torch.tensor(int(getattr(trainer.lightning_module, "frames_done", 0)))
        return candidates

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "frames_at_last_save": self._frames_at_last_save}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self._frames_at_last_save = int(state_dict.get("frames_at_last_save", 0))
