"""One warning line when learning has stalled: a policy that did not move, a critic that explains nothing.

Why: the health signals (:mod:`iquitos_lightning.agents.health`) make a stalled run visible to whoever opens
the plots; this callback says it in the console while the run goes on. A PPO run on this site kept its
untrained policy for 786k frames (an hour of a user's machine) while its losses looked ordinary; its critic's
explained variance was 0.00 from the start.

What it reads: the dict a ``training_step`` returns (``outputs``), the keys ``health/policy_drift`` (logged
by the agents on the last rollout of each evaluation period: the mean change of the deterministic action
over the period) and ``health/explained_variance`` (on-policy agents, every rollout). Any LightningModule
that returns those keys gets the same checks; one that does not gets none.

Checked at the end of every evaluation period, each warning at most once per fit:
- the policy's actions did not move (drift below ``min_policy_drift``);
- the critic's explained variance, averaged over the period, is below ``min_explained_variance``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.utilities import rank_zero_warn

from iquitos_lightning.agents.contract import frames_done

POLICY_DRIFT = "health/policy_drift"
EXPLAINED_VARIANCE = "health/explained_variance"


class LearningHealth(pl.Callback):
    """Warns once per fit when a policy has not moved over an evaluation period or its critic explains nothing.

    Args:
        min_policy_drift: below this mean change of the deterministic action over a period (in half-widths of
            the action range) the policy counts as not moving.
        min_explained_variance: below this period mean the critic counts as not fitting the value targets.
    """

    def __init__(self, min_policy_drift: float = 1e-6, min_explained_variance: float = 0.1) -> None:
        self.min_policy_drift = min_policy_drift
        self.min_explained_variance = min_explained_variance
        self.warnings: list[str] = []  # what this fit warned, in order (the run's log and tests read it)
        self._explained_variances: list[float] = []

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.warnings = []
        self._explained_variances = []

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if not isinstance(outputs, Mapping):
            return
        if EXPLAINED_VARIANCE in outputs:
            self._explained_variances.append(float(outputs[EXPLAINED_VARIANCE]))
        if POLICY_DRIFT in outputs:
            self._check_period(float(outputs[POLICY_DRIFT]), _frames(trainer, pl_module))
            self._explained_variances = []

    def _check_period(self, drift: float, frames: str) -> None:
        if drift < self.min_policy_drift:
            self._warn(
                "policy",
                f"health: the policy did not move over the evaluation period ending at {frames} (mean action change "
                f"{drift:.2g} of the half range): check the learning rates, actor_delay_frames and the reward scale",
            )
        if self._explained_variances:
            mean = sum(self._explained_variances) / len(self._explained_variances)
            if mean < self.min_explained_variance:
                self._warn(
                    "critic",
                    f"health: the critic explains {mean:.0%} of the value targets' variance over the period ending "
                    f"at {frames}: the advantages are mostly noise; normalise or scale the rewards, or give the "
                    "critic more updates per rollout",
                )

    def _warn(self, kind: str, message: str) -> None:
        if any(warning.startswith(kind) for warning in self.warnings):
            return
        self.warnings.append(f"{kind}: {message}")
        rank_zero_warn(message)


def _frames(trainer: pl.Trainer, pl_module: pl.LightningModule) -> str:
    frames = frames_done(pl_module)
    return f"frame {frames:,}" if frames is not None else f"step {trainer.global_step:,}"
