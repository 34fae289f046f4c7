"""The pruning side of a ``tune`` trial, inside its ``fit`` process: each periodic evaluation is reported to the
study, and a trial the pruner judges hopeless stops there.

Why in the ``fit`` process: the evaluations happen there (``rollout.eval_every_frames``), on whatever node the
launcher chose; reporting straight to the shared study storage needs no channel back to the driver, and the
trial stops at the evaluation that condemned it instead of training on. The driver learns of the pruning from
the marker file this callback writes into the run folder (so a driver that was itself interrupted still knows,
when it resumes, that the trial was pruned and not cut short).

The ``tune`` driver adds it to each trial's ``fit`` with ``--trainer.callbacks+=``; nothing else uses it.
"""

from __future__ import annotations

import json
from pathlib import Path

import lightning.pytorch as pl

from iquitos_lightning.agents.contract import frames_done
from iquitos_lightning.atomic_files import write_atomically
from iquitos_lightning.experiments.study import evaluation_value, make_pruner, open_storage

PRUNED_MARKER = "pruned.json"


class TrialPruning(pl.Callback):
    """Report every evaluation of this run to trial ``trial_number`` of the study; stop the run when pruned.

    Args:
        storage: the study's storage (journal file path or RDB URL), as the driver opened it.
        study_name: the study.
        trial_number: the trial this run is.
        objective: ``thesis`` or ``tariff``: which evaluation value is reported (experiments/study.py).
        pruner, startup_trials: the driver's pruner settings (Optuna does not store the pruner).
        marker: the file written when the trial is pruned (``<run>/pruned.json``).
    """

    def __init__(
        self,
        storage: str,
        study_name: str,
        trial_number: int,
        objective: str,
        pruner: str,
        startup_trials: int,
        marker: str,
    ) -> None:
        self.storage, self.study_name, self.trial_number = storage, study_name, trial_number
        self.objective, self.marker = objective, Path(marker)
        self.pruner_settings = (pruner, startup_trials)
        self._trial = None

    def _open_trial(self):
        # lazy: optuna is needed by tune trials only
        import optuna

        if self._trial is None:
            storage = open_storage(self.storage)
            study = optuna.load_study(
                study_name=self.study_name, storage=storage, pruner=make_pruner(*self.pruner_settings)
            )
            trial_id = storage.get_trial_id_from_study_id_trial_number(
                storage.get_study_id_from_name(self.study_name), self.trial_number
            )
            self._trial = optuna.trial.Trial(study, trial_id)
        return self._trial

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        metrics = {key: float(value) for key, value in trainer.callback_metrics.items()}
        frames = frames_done(pl_module)
        step = trainer.global_step if frames is None else frames
        trial = self._open_trial()
        trial.report(evaluation_value(metrics, self.objective), step)
        if trial.should_prune():
            record = {"trial": self.trial_number, "frames": step, "value": evaluation_value(metrics, self.objective)}
            write_atomically(json.dumps(record).encode(), self.marker, what="pruning marker")
            trainer.should_stop = True
