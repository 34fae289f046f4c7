"""Periodic checkpoints counted in environment frames, plus ``last``, through Lightning's ``ModelCheckpoint``.

Why a subclass: Lightning counts checkpoint periods in optimizer steps (``global_step``: a varying number per
rollout, SAC's updates or PPO's epochs x minibatches) or epochs; an RL run is planned in env frames. This callback
saves after the training batch that crosses each multiple of ``every_n_frames`` (and after the batch that completes
the frame budget, so every finished run ends with a checkpoint) and keeps everything else of ``ModelCheckpoint``
(``dirpath``, ``save_top_k``, ``save_last``, the filename template, which may use ``{frames}``). ``fit --ckpt_path
last`` finds the ``last`` checkpoint in ``dirpath``: a fixed ``dirpath`` (the CLI derives
``<save_dir>/<name>/checkpoints`` from the run's name, ``--run.name``) so a new run version still finds it.

What it adds so that nothing is lost (README, "When things go wrong"):
- **Ctrl-C**: during ``fit`` the first Ctrl-C is a request (:mod:`.interrupt`); the run saves after
  the current training batch (or the validation in progress) and stops; the CLI then exits with
  status 130 saying where the checkpoint is (``interrupt.last_request``).
- **SIGTERM** (``timeout``, ``kill -- -PGID``, a scheduler): the same as a first Ctrl-C; Lightning then
  raises ``SIGTERMException`` and the CLI exits with status 143 saying where the checkpoint is.
- **Errors** (a second Ctrl-C, a numerical fault, a crash in the env) save a checkpoint too
  (``save_on_exception``), except bad input and unwritable output, where saving again would not
  help, and out-of-memory when an ``OutOfMemoryHandler`` is installed (it saves ``emergency-oom.ckpt``).
- **kill -9 at any moment**: files are written atomically by
  :class:`~iquitos_lightning.training.checkpoint_io.SafeCheckpointIO` (the CLI's default plugin), the
  ``last`` link is swapped atomically and replaced files are deleted only after ``last`` points to the
  new one (:class:`~iquitos_lightning.fastpath.model_checkpoint.AtomicModelCheckpoint`, the base class);
  leftover ``*.partial`` files of a killed write are removed when the next fit starts.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn

from iquitos_lightning.agents.contract import frame_budget, frames_done
from iquitos_lightning.atomic_files import ensure_writable_folder, remove_stale_partials
from iquitos_lightning.errors import ConfigError, OutputWriteError
from iquitos_lightning.fastpath.model_checkpoint import AtomicModelCheckpoint
from iquitos_lightning.training.callbacks.interrupt import InterruptRequest
from iquitos_lightning.training.callbacks.oom import OutOfMemoryHandler, is_out_of_memory


def _left_to_the_oom_handler(trainer: pl.Trainer, exception: BaseException) -> bool:
    """An out-of-memory error when an ``OutOfMemoryHandler`` is installed: it saves (and frees memory first)."""
    handled = any(isinstance(callback, OutOfMemoryHandler) for callback in trainer.callbacks)
    return handled and is_out_of_memory(exception)


class FrameCheckpoint(AtomicModelCheckpoint):
    """``ModelCheckpoint`` that saves every ``every_n_frames`` environment frames (and ``last``)."""

    def __init__(
        self,
        every_n_frames: int = 100_000,
        dirpath: str | None = None,
        filename: str = "{frames}",
        save_top_k: int = 1,
        save_last: bool | str | None = "link",
        save_on_exception: bool = True,
        **kwargs: Any,
    ) -> None:
        if every_n_frames <= 0:
            raise ConfigError(f"checkpoint.every_n_frames must be a positive number of frames, got {every_n_frames}")
        kwargs.setdefault("every_n_epochs", 0)  # frames decide, not epochs
        super().__init__(
            dirpath=dirpath,
            filename=filename,
            save_top_k=save_top_k,
            save_last=save_last,
            save_on_exception=save_on_exception,
            **kwargs,
        )
        self.every_n_frames = every_n_frames
        self._frames_at_last_save = 0
        self._interrupt = InterruptRequest()
        self._training_started = False

    # ----- when to save ----------------------------------------------------------------------
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        if stage == TrainerFn.FITTING and self.dirpath and "://" not in str(self.dirpath) and trainer.is_global_zero:
            ensure_writable_folder(self.dirpath)  # a read-only folder fails now, not at the first save
            for stale in remove_stale_partials(self.dirpath):
                rank_zero_info(f"removed {stale}: an unfinished checkpoint write of a killed run")

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._interrupt.install()

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._interrupt.restore()

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._interrupt.restore()

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_train_start(trainer, pl_module)
        self._training_started = True
        self._frames_at_last_save = max(self._frames_at_last_save, _frames(pl_module))

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if trainer.fast_dev_run or trainer.sanity_checking:
            return
        frames = _frames(pl_module)
        self._notice_sigterm(trainer)
        if self._interrupt.requested:
            trainer.should_stop = True
        period_crossed = frames // self.every_n_frames > self._frames_at_last_save // self.every_n_frames
        budget = frame_budget(pl_module)
        budget_done = budget is not None and frames >= budget  # a budget shorter than the period still ends saved
        unsaved = frames != self._frames_at_last_save
        if period_crossed or (unsaved and (budget_done or self._interrupt.requested)):
            self.save_now(trainer)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """After an evaluation: stop and save on a pending Ctrl-C; else re-save the checkpoint of these frames.

        An evaluation period ends on the same batch as a checkpoint period more often than not; that
        checkpoint was written before the evaluation ran, so without the re-save the latest checkpoint
        would never hold the latest evaluation (its KPIs, the report's curve). Same frames, same file.
        """
        super().on_validation_end(trainer, pl_module)
        if trainer.sanity_checking or trainer.fast_dev_run or trainer.state.fn != TrainerFn.FITTING:
            return
        frames = _frames(pl_module)
        self._notice_sigterm(trainer)
        if self._interrupt.requested:
            trainer.should_stop = True
        if frames > 0 and (frames == self._frames_at_last_save or self._interrupt.requested):
            self.save_now(trainer)

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        """Save what training reached before the error, unless the error is one a save cannot help."""
        self._interrupt.restore()
        if not self.save_on_exception or not self._training_started or trainer.fast_dev_run:
            return
        if isinstance(exception, ConfigError | OutputWriteError) or _left_to_the_oom_handler(trainer, exception):
            return
        self._notice_sigterm(trainer)
        if _frames(pl_module) == self._frames_at_last_save:
            if self._interrupt.requested:  # the CLI says where the checkpoint is in its one line
                self._interrupt.up_to_date = self.last_model_path or None
            elif self.last_model_path:
                exception.add_note(f"the last checkpoint is up to date: {self.last_model_path}")
            return
        try:
            self.save_now(trainer)
        except Exception as error:  # never hide the original error behind a failed save
            rank_zero_warn(f"could not save a checkpoint after {type(exception).__name__}: {error}")
            exception.add_note(f"no checkpoint could be saved ({error}); the previous one is intact")
            return
        exception.add_note(f"checkpoint saved: {self.last_model_path} (resume with --ckpt_path last)")

    def _notice_sigterm(self, trainer: pl.Trainer) -> None:
        if trainer.received_sigterm and not self._interrupt.terminated:
            self._interrupt.note_sigterm()

    def save_now(self, trainer: pl.Trainer) -> None:
        """Save the top-k file and ``last`` for the current frame count (replaced files are removed afterwards)."""
        self._frames_at_last_save = _frames(trainer.lightning_module)
        self.save_checkpoints(trainer)
        if self._interrupt.requested:
            self._interrupt.saved_to = self.last_saved_path()

    def extra_candidates(self, trainer: pl.Trainer) -> dict[str, torch.Tensor]:
        """``{frames}`` for the filename template."""
        return {"frames": torch.tensor(_frames(trainer.lightning_module))}

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "frames_at_last_save": self._frames_at_last_save}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self._frames_at_last_save = int(state_dict.get("frames_at_last_save", 0))


def _frames(pl_module: Any) -> int:
    return frames_done(pl_module) or 0
