"""The policy of the best evaluation on the selection year, kept as ``best.ckpt``: early stopping without a peek.

Why: a run's evaluations move from one to the next (docs/experiments.md: A2C's battery flips between charging at noon
and never charging within 128 updates), so its last policy is a draw. An agent with a selection year
(``env.validation_site_seed``, agents/selection.py) logs ``select/score`` at every evaluation, on a year it neither
trains on nor reports; this ``ModelCheckpoint`` keeps the best-scoring one and ``final_test.policy: best`` tests it
on the evaluation year. It is the policy, not a resume point: an agent that can (:class:`SavesPolicyOnly`, SAC)
leaves its replay buffer out (50-86 MB a file on the card's site, rewritten at every better evaluation), so ``test
--ckpt_path`` takes it, and ``fit --ckpt_path`` refuses it there in one line naming ``last.ckpt``; an on-policy
agent's ``best.ckpt`` is whole. On a module that selects nothing it saves nothing. Resume keeps the best so far
(Lightning saves the callback's state in every checkpoint).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import lightning.pytorch as pl

from iquitos_lightning.agents.contract import SavesPolicyOnly, SelectsPolicy
from iquitos_lightning.agents.selection import SELECTION_METRIC
from iquitos_lightning.fastpath.model_checkpoint import AtomicModelCheckpoint

BEST_FILENAME = "best"  # <dirpath>/best.ckpt


class BestCheckpoint(AtomicModelCheckpoint):
    """``ModelCheckpoint`` on ``select/score`` (higher is better) that keeps one file, ``best.ckpt``."""

    def __init__(self, dirpath: str | None = None, **kwargs: Any) -> None:
        super().__init__(
            dirpath=dirpath,
            filename=BEST_FILENAME,
            monitor=SELECTION_METRIC,
            mode="max",
            save_top_k=1,
            save_last=False,
            save_on_train_epoch_end=False,  # after each evaluation, when the score exists
            enable_version_counter=False,  # a better policy replaces best.ckpt in place
            auto_insert_metric_name=False,
            **kwargs,
        )

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        if not (isinstance(pl_module, SelectsPolicy) and pl_module.selects_policy):
            self.save_top_k = 0  # nothing to select on: no file, and no complaint about a missing metric

    @contextmanager
    def saving(self, trainer: pl.Trainer) -> Iterator[None]:
        module = trainer.lightning_module
        if not isinstance(module, SavesPolicyOnly):
            yield
            return
        module.saving_policy_only = True
        try:
            yield
        finally:
            module.saving_policy_only = False
