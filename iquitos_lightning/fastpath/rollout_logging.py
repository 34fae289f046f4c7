"""Per-rollout training metrics straight to the loggers, through Lightning's own logger connector.

Why not ``self.log_dict``: every ``self.log`` call goes through Lightning's ``ResultCollection`` (checks, a tensor
per value, a reduction state per key, the callback-metrics cache), about half a millisecond per key on the 2-core
CPU. An agent logs ~20 keys per rollout, and with the twin a rollout of A2C's 512 frames takes ~30 ms: the learner
bench's profile put 23 % of A2C's time in ``log``/``log_dict`` (docs/performance.md). Per-rollout metrics are
plain floats the agent has already reduced (one value per rollout, ``on_step`` only, never averaged over an epoch),
so the collection has nothing to do for them.

What stays the same: the loggers see the same rows, at the same steps and cadence as ``self.log(..., on_step=True,
on_epoch=False)`` gives them: this calls the connector's ``log_metrics`` (which adds ``epoch``, uses the batches
that stepped as the step, calls every logger and saves it, and keeps ``trainer.logged_metrics``) on exactly the
batches where the connector would have (``should_update_logs``). What differs: the values are not in
``trainer.callback_metrics`` (nothing reads training metrics there; evaluation metrics still go through
``self.log``, which the report, the pruner and the tests read). This is the one place that reaches into
Lightning's connector (``trainer._logger_connector``); ``tests/agents/test_rollout_logging.py`` checks that the
CSV rows equal ``self.log_dict``'s.
"""

from __future__ import annotations

from collections.abc import Mapping

import lightning.pytorch as pl
from lightning.pytorch.trainer.connectors.logger_connector import _LoggerConnector

from iquitos_lightning.fastpath.pins import require

require(_LoggerConnector, ["should_update_logs", "log_metrics"], library="lightning", override=__name__)


def log_rollout_metrics(trainer: pl.Trainer, metrics: Mapping[str, float]) -> None:
    """Hand ``metrics`` (floats, one rollout's) to every logger when Lightning would log a training step now."""
    require(trainer, ["_logger_connector"], library="lightning", override=__name__)
    connector = trainer._logger_connector
    if metrics and (connector.should_update_logs or trainer.fast_dev_run):
        connector.log_metrics(dict(metrics))
