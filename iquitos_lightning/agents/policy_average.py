"""A moving average of the actor's weights, for the policy that evaluations and tests act with (Polyak averaging).

Why: an off-policy actor follows its critic's errors from one update to the next, so two evaluations a few
thousand frames apart can differ more than the controllers a table compares (thesis SAC: 0.5-1.5 a year between
neighbouring evaluations, against 2.2 between the rule and the optimum). The average of the last few thousand
updates' weights moves with what they agree on and less with each batch's noise (Polyak and Juditsky 1992; the
"EMA of the policy" of modern deep-RL and diffusion training). The actor that collects and learns is unchanged:
the average only decides what is evaluated, chosen and tested. Measured (docs/control.md): tariff SAC's
evaluations steadier (no fall of 20 points between two), the thesis runs' choices unchanged on average.

Built on PyTorch's :class:`~torch.optim.swa_utils.AveragedModel` (a copy of the actor whose parameters hold the
average, its count ``n_averaged`` a buffer: both in the state dict, so checkpoints, resume and ``test`` carry
them). Not Lightning's ``WeightAveraging`` callback: it copies the whole LightningModule, envs and replay buffer
with it, and swaps every weight, the critics' included, in for validation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel

from iquitos_lightning.fastpath.foreach_ops import lerp_all_

# AveragedModel's multi_avg_fn: (averaged weights, current weights, updates averaged so far), in place.
AveragingStep = Callable[[Sequence[torch.Tensor], Sequence[torch.Tensor], torch.Tensor], None]


def mean_then_exponential(rate: float) -> AveragingStep:
    """The averaging step of :class:`AveragedModel` (its ``multi_avg_fn``): the plain mean of the first ``1 / rate``
    updates' weights, then an exponential moving average of rate ``rate``.

    Why the plain mean first: an exponential average started at the first update keeps ``(1 - rate)^n`` of the
    first weights after ``n`` updates (37 % after ``1 / rate``), while the policy moves fastest early on; the mean
    weighs every update seen so far alike and hands over where the two weights meet."""

    def average(averaged: Sequence[torch.Tensor], current: Sequence[torch.Tensor], count: torch.Tensor) -> None:
        weight = max(rate, 1.0 / (int(count) + 1))  # count: the updates averaged so far (1 after the first copy)
        lerp_all_(averaged, current, weight)

    return average


def averaged_policy(actor: nn.Module, rate: float) -> AveragedModel:
    """A frozen copy of ``actor`` that :meth:`AveragedModel.update_parameters` moves towards the actor's weights at
    ``rate`` per call (:func:`mean_then_exponential`); its ``module`` is the averaged policy."""
    average = AveragedModel(actor, multi_avg_fn=mean_then_exponential(rate), use_buffers=False)
    average.requires_grad_(False)  # the optimizers never see it; Lightning's summary counts it as not trainable
    return average
