"""Lightning's rich progress bar describing a frame-bounded run's training as "Epoch 3", not "Epoch 3/-2".

Why: Lightning builds the training bar's description in ``RichProgressBar._get_train_description`` and writes
``Epoch {n}/{max_epochs - 1}``; an RL run bounded by frames or steps has ``max_epochs=-1``, so its bar read
"Epoch 3/-2". tests/training/callbacks/test_progress_bar.py reads the bar's description.
"""

from __future__ import annotations

from lightning.pytorch.callbacks import RichProgressBar

from iquitos_lightning.fastpath.pins import require

require(RichProgressBar, ["_get_train_description"], library="lightning", override=__name__)


class EpochOnlyWhenUnbounded(RichProgressBar):
    """A ``RichProgressBar`` whose training description is just the epoch when the run has no epoch bound."""

    def _get_train_description(self, current_epoch: int) -> str:
        if self.trainer.max_epochs is not None and self.trainer.max_epochs < 0:
            return f"{f'Epoch {current_epoch}':{len(self.validation_description)}}"
        return super()._get_train_description(current_epoch)
