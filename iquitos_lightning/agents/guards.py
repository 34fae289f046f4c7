"""Non-finite losses and gradients: skip that update, count it, and stop after too many in a row (the guard).

Why: one NaN gradient step turns every weight into NaN and a year-long run keeps going, logging NaN,
until someone looks. Checking before the optimizers step keeps the weights (and Adam's moments)
exactly as they were before the fault; an isolated fault (one bad batch) costs one update, a
persistent one stops the run with a message naming the loss term, and since no faulty update was
applied, the checkpoint saved at that stop holds the weights from before the fault.

Cost: one fused pass over the gradients and one host sync per update: the global norm when the agent
clips with it (PPO, A2C: the clip then uses that norm, returned with the step's outcome), else the
GradScaler's own finiteness kernel (:func:`gradients_are_finite`, a quarter of the norm's cost). Under fp16
mixed precision the gradient check is left to the GradScaler (scaled gradients overflow by design and the
scaler skips those steps itself); the losses are still checked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from iquitos_lightning.errors import NumericalFault
from iquitos_lightning.fastpath.foreach_ops import all_finite


class NonFiniteTraining(NumericalFault):
    """Too many updates in a row had a non-finite loss or gradient."""


@dataclass(frozen=True)
class Step:
    """What :func:`backward_and_step` did: the faulty term (None: the optimizers stepped) and the global norm of the
    gradients before any clip (None when it computed none)."""

    fault: str | None
    gradient_norm: torch.Tensor | None = None

    @property
    def applied(self) -> bool:
        return self.fault is None


@dataclass(frozen=True)
class Fault:
    """Where a streak of non-finite updates began."""

    term: str  # "loss_qvalue" or "gradient of loss_actor"
    frames: int
    updates: int


def gradients_are_finite(gradients: Sequence[torch.Tensor]) -> torch.Tensor:
    """Whether every element of ``gradients`` is finite, as a boolean tensor on their device (no host sync).

    Why not the global norm's finiteness: that is three operations (a norm per tensor, a stack, a norm), and the
    agents that do not clip (SAC) never read the norm. This is the one kernel torch's GradScaler checks gradients
    with (:func:`~iquitos_lightning.fastpath.foreach_ops.all_finite`, every value's bits left as they were). 12 us
    against 48 us for the norm's check on SAC's 13 gradients of the tariff profile (one thread, warm).
    Gradients on several devices fall back to the norm."""
    device = gradients[0].device
    if any(grad.device != device or grad.is_sparse for grad in gradients):
        return torch.isfinite(torch.nn.utils.get_total_norm(gradients))
    return all_finite(gradients)


def find_nonfinite(
    losses: Mapping[str, torch.Tensor],
    gradients_by_term: Mapping[str, Sequence[torch.Tensor]],
    gradient_norm: torch.Tensor | None = None,
) -> str | None:
    """The first non-finite loss term, else the term whose gradients are non-finite, else None (one host sync).
    ``gradient_norm``: the global norm of all those gradients, when the caller has it (it is finite exactly when
    they all are); else :func:`gradients_are_finite` checks them."""
    values = [loss.detach().reshape(-1).float() for loss in losses.values()]
    gradients = [grad for grads in gradients_by_term.values() for grad in grads]
    checks = [torch.isfinite(torch.cat(values)).all()] if values else []
    if gradients:
        finite = gradients_are_finite(gradients) if gradient_norm is None else torch.isfinite(gradient_norm)
        checks.append(finite.to(checks[0].device) if checks else finite)  # NaN/inf in any gradient
    if not checks or bool(torch.stack(checks).all()):
        return None
    for name, loss in losses.items():  # slow path, only on a fault: say which
        if not bool(torch.isfinite(loss.detach()).all()):
            return name
    for term, grads in gradients_by_term.items():
        if any(not bool(torch.isfinite(grad).all()) for grad in grads):
            return f"gradient of {term}"
    return "gradient"


class NonFiniteGuard:
    """Counts skipped updates; raises :class:`NonFiniteTraining` after ``max_in_a_row`` consecutive ones."""

    def __init__(self, max_in_a_row: int) -> None:
        self.max_in_a_row = max_in_a_row
        self.skipped_total = 0
        self.in_a_row = 0
        self.streak_start: Fault | None = None

    def record_ok(self) -> None:
        self.in_a_row = 0
        self.streak_start = None

    def record_skip(self, term: str, frames: int, updates: int) -> bool:
        """Count a skipped update; True when it starts a streak (worth a warning). Raises past the limit."""
        self.skipped_total += 1
        self.in_a_row += 1
        starts_streak = self.streak_start is None
        if starts_streak:
            self.streak_start = Fault(term, frames, updates)
        if self.in_a_row >= self.max_in_a_row:
            start = self.streak_start
            raise NonFiniteTraining(
                f"training stopped: {self.in_a_row} updates in a row had a non-finite {term} (the first, "
                f"{start.term}, at frame {start.frames:,} after {start.updates:,} updates; "
                f"{self.skipped_total} skipped in all). None of them was applied, so the weights are those "
                "from before the fault. Lower the learning rates, check the rewards' scale, or allow more "
                "with --model.rollout.max_nonfinite_in_a_row"
            )
        return starts_streak


def backward_and_step(
    optimizers: Sequence[torch.optim.Optimizer],
    backward: Callable[[torch.Tensor], None],
    total: torch.Tensor,
    losses: Mapping[str, torch.Tensor],
    terms_of_param_groups: Sequence[str],
    *,
    check: bool,
    gradients_checked_by_scaler: bool,
    clip_to: float | None = None,
) -> Step:
    """Backward ``total``, clip the gradients' global norm to ``clip_to`` and step every optimizer, unless a loss term
    or a gradient is non-finite.

    ``losses`` holds the (detached) terms ``total`` sums (the ``loss_*`` ones are checked and named);
    ``terms_of_param_groups`` names, per parameter group (the optimizers' groups in order), the loss term its
    gradients come from. On a fault no optimizer steps and the gradients are dropped. ``check`` False (inside a
    CUDA graph, where the host sync cannot run) steps unchecked; under fp16 mixed precision the GradScaler checks
    the gradients itself.

    ``clip_to`` (PPO, A2C; 0: measure only): the global norm of every optimizer's gradients is computed once, serves
    the finiteness check, clips them (``clip_grads_with_norm_``: the bits of ``clip_grad_norm_``) and comes back in
    the :class:`Step`, so a clip and a health signal never compute it twice. Gradients that a GradScaler has yet to
    unscale (fp16 mixed precision: Lightning unscales them inside the optimizer's step) are neither measured nor
    clipped here: the agent clips them in ``on_before_optimizer_step``. Without ``clip_to`` the check computes no
    norm (:func:`gradients_are_finite`).
    """
    loss_terms = {name: value for name, value in losses.items() if name.startswith("loss_")}
    for optimizer in optimizers:
        optimizer.zero_grad(set_to_none=True)
    backward(total)
    groups = [group for optimizer in optimizers for group in optimizer.param_groups]
    measured = clip_to is not None and not gradients_checked_by_scaler
    every_gradient = [p.grad for group in groups for p in group["params"] if p.grad is not None] if measured else []
    norm = torch.nn.utils.get_total_norm(every_gradient) if every_gradient else None
    if check:
        gradients: dict[str, list[torch.Tensor]] = {}
        for group, term in zip(groups, terms_of_param_groups, strict=True):
            grads = gradients.setdefault(term, [])
            if not gradients_checked_by_scaler:
                grads.extend(p.grad for p in group["params"] if p.grad is not None)
        fault = find_nonfinite(loss_terms, gradients, norm)
        if fault is not None:
            for optimizer in optimizers:
                optimizer.zero_grad(set_to_none=True)
            return Step(fault, norm)
    if norm is not None and clip_to:
        torch.nn.utils.clip_grads_with_norm_([p for group in groups for p in group["params"]], clip_to, norm)
    for optimizer in optimizers:
        optimizer.step()
    return Step(None, norm)
