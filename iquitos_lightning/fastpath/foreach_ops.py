"""Torch's multi-tensor kernels that have no public name: one call over a list of tensors instead of a loop.

Why: at this project's network sizes a Python loop over a dozen parameter tensors costs more than the arithmetic,
so the updates that touch every weight use torch's fused ``_foreach`` kernels (as its optimizers and GradScaler
do). Their names are private; here they are pinned (``require``) and wrapped once.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from iquitos_lightning.fastpath.pins import require

require(torch, ["_foreach_lerp_", "_amp_foreach_non_finite_check_and_unscale_"], library="torch", override=__name__)


def lerp_all_(targets: Sequence[torch.Tensor], sources: Sequence[torch.Tensor], weight: float) -> None:
    """``target += weight * (source - target)`` for every pair, in place, in one kernel launch per device."""
    torch._foreach_lerp_(list(targets), list(sources), weight)


def all_finite(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Whether every element of ``tensors`` (one device, dense) is finite, as a boolean tensor on their device (no
    host sync): the kernel torch's GradScaler checks gradients with, at a scale of 1, which multiplies each value by
    1 in place and so leaves every bit as it was (denormals and signed zeros included:
    tests/robustness/test_numerical_faults.py)."""
    device = tensors[0].device
    found_nonfinite = torch.zeros(1, device=device)
    torch._amp_foreach_non_finite_check_and_unscale_(list(tensors), found_nonfinite, torch.ones(1, device=device))
    return found_nonfinite[0] == 0
