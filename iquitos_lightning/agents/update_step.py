"""The update step every agent runs: its planned fast path, and optimizer steps that refuse non-finite values.

Why a mixin of the base (:class:`~.base.RLAgent`): an update is an agent's own method (``update``, through
Lightning's ``manual_backward`` and optimizers), so its plumbing must reach the module's trainer, precision and
counters; kept here, the base reads as the learning loop and this as the step inside it. :meth:`run_update` runs the
agent's ``update`` through the switches :mod:`.speed` plans once per fit (compile, CUDA graphs); inside it the agent
calls :meth:`apply_gradients`, which backs the loss up, skips the step if a loss or gradient is non-finite
(:mod:`.guards`), clips when asked and returns the :class:`~.guards.Step` with the gradient norm it measured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from lightning.pytorch.utilities import rank_zero_warn
from tensordict import TensorDictBase

from iquitos_lightning.agents.guards import NonFiniteGuard, Step, backward_and_step
from iquitos_lightning.agents.speed import PlannedUpdate, SpeedConfig, planned_update


class GuardedUpdates:
    """The update step of a LightningModule agent with manual optimization (mixed into :class:`~.base.RLAgent`, which
    provides ``loss_terms``, ``update`` and ``fixed_update_shapes``)."""

    speed_config: SpeedConfig
    nonfinite: NonFiniteGuard
    frames_done: int
    updates_done: int
    _planned: PlannedUpdate | None = None  # the agent's update as it runs here (planned once per fit)
    _last_update_applied = True  # False when apply_gradients skipped the update in progress

    def forget_update_plan(self) -> None:
        """Plan the fast path again at the next update (a new fit, maybe on another device)."""
        self._planned = None

    def compute_losses(self, batch: TensorDictBase) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """:meth:`loss_terms`, compiled when ``speed.compile`` is on."""
        return self._planned_update().loss_fn(batch)

    def run_update(self, batch: TensorDictBase) -> dict[str, torch.Tensor]:
        """One :meth:`update` through the planned fast path; counts it unless it was skipped as non-finite."""
        update_fn = self._planned_update().update_fn
        self._last_update_applied = True
        metrics = update_fn(batch)
        self.updates_done += int(self._last_update_applied)
        return metrics

    @property
    def last_update_applied(self) -> bool:
        """Whether the update :meth:`run_update` just ran was applied (not skipped as non-finite)."""
        return self._last_update_applied

    @property
    def gradients_scaled(self) -> bool:
        """Whether a GradScaler scales the gradients (fp16 mixed precision): Lightning unscales them only inside the
        optimizer's step, so they are checked by the scaler and clipped in ``on_before_optimizer_step``."""
        return getattr(self.trainer.precision_plugin, "scaler", None) is not None

    def apply_gradients(
        self,
        total: torch.Tensor,
        losses: Mapping[str, torch.Tensor],
        terms_of_param_groups: Sequence[str],
        clip_to: float | None = None,
    ) -> Step:
        """Backward ``total`` and step every optimizer, unless a loss term or a gradient is non-finite
        (:func:`~iquitos_lightning.agents.guards.backward_and_step`, which also clips to ``clip_to`` and returns
        the gradient norm it measured). ``terms_of_param_groups`` names, per parameter group (in
        ``configure_optimizers`` order), the loss term its gradients come from. A faulty update is skipped and
        counted; after ``max_nonfinite_in_a_row`` in a row
        :class:`~iquitos_lightning.agents.guards.NonFiniteTraining` stops the run.
        """
        optimizers = self.optimizers()
        optimizers = list(optimizers) if isinstance(optimizers, list | tuple) else [optimizers]
        check = self._planned_update().checked
        scaled = self.gradients_scaled
        step = backward_and_step(
            optimizers, self.manual_backward, total, losses, terms_of_param_groups,
            check=check, gradients_checked_by_scaler=scaled, clip_to=clip_to,
        )  # fmt: skip
        self._last_update_applied = step.applied
        if step.applied:
            self.nonfinite.record_ok()
        elif self.nonfinite.record_skip(step.fault, self.frames_done, self.updates_done):
            rank_zero_warn(
                f"skipped an update: non-finite {step.fault} at frame {self.frames_done:,} "
                f"(stops after {self.nonfinite.max_in_a_row} in a row)"
            )
        return step

    @property
    def attached_to_trainer(self) -> bool:
        """Whether a Trainer runs this module (Lightning's ``trainer`` property raises when none does)."""
        try:
            return self.trainer is not None
        except RuntimeError:
            return False

    @property
    def planned_speed(self) -> SpeedConfig | None:
        """The speed switches this fit's updates really run with (after :func:`plan_speed` refused what the device
        or precision cannot do); None before the first update."""
        return None if self._planned is None else self._planned.speed

    def _planned_update(self) -> PlannedUpdate:
        if self._planned is None:
            precision = str(self.trainer.precision) if self.attached_to_trainer else "32-true"
            self._planned = planned_update(
                self.speed_config, self.device, precision, self.fixed_update_shapes(), self.loss_terms, self.update
            )
        return self._planned
