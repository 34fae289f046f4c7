"""One warning line when learning has stalled: a policy that did not move, a critic that explains nothing.

Why: the health signals (:mod:`iquitos_lightning.agents.health`) make a stalled run visible to whoever opens
the plots; this callback says it in the console while the run goes on. A PPO run on this site kept its
untrained policy for 786k frames (an hour of a user's machine) while its losses looked ordinary; its critic's
explained variance was 0.00 from the start.

What it reads: the dict a ``training_step`` returns (``outputs``), the keys ``health/policy_drift`` (logged
by the agents on the last rollout of each evaluation period: the mean change of the deterministic action
over the period), ``health/explained_variance`` (on-policy agents, every rollout) and
``health/actions_at_bounds`` (every agent: the share of action components at an end of their range). Any
LightningModule that returns those keys gets the same checks; one that does not gets none.

Checked at the end of every evaluation period, each warning at most once per fit:
- the policy's actions did not move (drift below ``min_policy_drift``);
- the critic's explained variance, averaged over the period, is below ``min_explained_variance``;
- the share of actions at the ends of their range, averaged over the period, is above ``max_actions_at_bounds``:
  a squashed policy pinned there hardly explores and its gradient fades. Measured on this site (tariff): runs
  that collapsed onto the ends of the range read 93-100 % (A2C with a state-dependent scale that grew to 11, A2C at
  SB3-zoo settings by 380k frames; SAC under a wrong target entropy collapsed there too, unmeasured), runs that
  learned under 11 % (SAC, PPO) or 22 % (A2C) in any rollout. It does not tell A2C's stuck seeds from its learning
  ones: their period means overlap (10-17 % against up to 14 %).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.utilities import rank_zero_warn

from iquitos_lightning.agents.contract import frames_done

POLICY_DRIFT = "health/policy_drift"
EXPLAINED_VARIANCE = "health/explained_variance"
ACTIONS_AT_BOUNDS = "health/actions_at_bounds"
PERIOD_SIGNALS = (EXPLAINED_VARIANCE, ACTIONS_AT_BOUNDS)  # averaged over each evaluation period


class LearningHealth(pl.Callback):
    """Warns once per fit when, over an evaluation period, a policy has not moved, its critic explains nothing or its
    actions sit at the ends of their range.

    Args:
        min_policy_drift: below this mean change of the deterministic action over a period (in half-widths of
            the action range) the policy counts as not moving.
        min_explained_variance: below this period mean the critic counts as not fitting the value targets.
        max_actions_at_bounds: above this period mean share of action components at a bound the policy counts as
            pinned there.
    """

    def __init__(
        self, min_policy_drift: float = 1e-6, min_explained_variance: float = 0.1, max_actions_at_bounds: float = 0.25
    ) -> None:
        self.min_policy_drift = min_policy_drift
        self.min_explained_variance = min_explained_variance
        self.max_actions_at_bounds = max_actions_at_bounds
        self.warnings: list[str] = []  # what this fit warned, in order (the run's log and tests read it)
        self._period: dict[str, list[float]] = {key: [] for key in PERIOD_SIGNALS}  # this period's readings

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.warnings = []
        self._period = {key: [] for key in PERIOD_SIGNALS}

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if not isinstance(outputs, Mapping):
            return
        for key, readings in self._period.items():
            if key in outputs:
                readings.append(float(outputs[key]))
        if POLICY_DRIFT in outputs:
            self._check_period(float(outputs[POLICY_DRIFT]), _frames(trainer, pl_module))
            self._period = {key: [] for key in PERIOD_SIGNALS}

    def _check_period(self, drift: float, frames: str) -> None:
        if drift < self.min_policy_drift:
            self._warn(
                "policy",
                f"health: the policy did not move over the evaluation period ending at {frames} (mean action change "
                f"{drift:.2g} of the half range): check the learning rates, actor_delay_frames and the reward scale",
            )
        mean = self._period_mean(EXPLAINED_VARIANCE)
        if mean is not None and mean < self.min_explained_variance:
            self._warn(
                "critic",
                f"health: the critic explains {mean:.0%} of the value targets' variance over the period ending "
                f"at {frames}: the advantages are mostly noise; normalise or scale the rewards, or give the "
                "critic more updates per rollout",
            )
        share = self._period_mean(ACTIONS_AT_BOUNDS)
        if share is not None and share > self.max_actions_at_bounds:
            self._warn(
                "bounds",
                f"health: {share:.0%} of the actions sat at an end of their range over the period ending at "
                f"{frames}: the policy is pinned there, where it hardly explores and its gradient fades; check the "
                "initial and learned policy scale, the entropy weight or bonus, and the reward scale",
            )

    def _period_mean(self, key: str) -> float | None:
        """The mean of ``key``'s readings over the period (None: the agent logged none)."""
        readings = self._period[key]
        return sum(readings) / len(readings) if readings else None

    def _warn(self, kind: str, message: str) -> None:
        if any(warning.startswith(kind) for warning in self.warnings):
            return
        self.warnings.append(f"{kind}: {message}")
        rank_zero_warn(message)


def _frames(trainer: pl.Trainer, pl_module: pl.LightningModule) -> str:
    frames = frames_done(pl_module)
    return f"frame {frames:,}" if frames is not None else f"step {trainer.global_step:,}"
