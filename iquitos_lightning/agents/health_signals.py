"""The one way an agent's health signals reach the log: recorded while it learns a rollout, taken once per rollout.

Why one mechanism: the signals differ by algorithm (:mod:`.health`: PPO and A2C read the critic's fit before their
updates and the KL after them, SAC reads its Q networks on the last replay batch) but every agent has the policy's
drift over an evaluation period, and each signal must reach ``health/<name>`` the same way, in the order it was
recorded (the run report's ``health.csv`` keeps that order). So an agent only *records* what it measured, into the
:class:`HealthSignals` the base owns, and the base *takes* them after each rollout's :meth:`learn` and logs them.
Gradient norms come per optimizer step (the value :func:`~iquitos_lightning.agents.guards.backward_and_step`
returns) and are averaged over the rollout.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from tensordict import TensorDictBase
from torchrl.modules import ProbabilisticActor

from iquitos_lightning.agents.health import DriftProbe


class HealthSignals:
    """This rollout's health readings, in the order recorded, and the evaluation period's drift probe."""

    def __init__(self) -> None:
        self._readings: dict[str, float | torch.Tensor] = {}
        self._step_norms: list[torch.Tensor] = []  # each optimizer step's gradient norm before clipping
        self._drift_probe: DriftProbe | None = None  # the period's first observations and actions

    def watch_drift(self, policy: ProbabilisticActor, rollout: TensorDictBase) -> None:
        """On the first rollout of an evaluation period: keep its observations and the policy's actions on them."""
        if self._drift_probe is None:
            self._drift_probe = DriftProbe.of(policy, rollout)

    def record(self, readings: Mapping[str, float | torch.Tensor]) -> None:
        """Readings of this rollout (a tensor is read when taken)."""
        self._readings.update(readings)

    def record_gradient_norm(self, norm: torch.Tensor) -> None:
        """One optimizer step's gradient norm before clipping (skipped while a CUDA graph is captured: a capture
        computes nothing, and its replays record nothing either)."""
        if not (torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()):
            self._step_norms.append(norm.detach())

    def take_gradient_norm(self) -> float | None:
        """The mean gradient norm of the steps recorded since the last call (None: no step recorded one)."""
        norms, self._step_norms = self._step_norms, []
        return float(torch.stack(norms).mean()) if norms else None

    def take(self, policy: ProbabilisticActor, period_ended: bool) -> dict[str, float]:
        """This rollout's readings as floats, then forgotten; on the period's last rollout also ``policy_drift``
        (how far ``policy`` moved since :meth:`watch_drift`), and the next rollout starts a new probe."""
        taken = {name: float(value) for name, value in self._readings.items()}
        self._readings = {}
        if period_ended and self._drift_probe is not None:
            taken["policy_drift"] = self._drift_probe.drift(policy)
            self._drift_probe = None
        return taken
