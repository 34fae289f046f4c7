"""A move or cast of a module (``.to``, ``.cuda``, ``.double``) that also reaches the actors' distribution bounds.

Why: TorchRL keeps a TanhNormal's ``low``/``high`` in the actor's ``distribution_kwargs``, a plain dict, which
``nn.Module._apply`` (what ``.to(device)`` runs) does not walk. So on a GPU every distribution the actor built copied
its bounds from the host: one copy per forward in eager, and an error inside a CUDA graph (torch 2.11 refuses
unpinned host copies during capture; seen on an H200). :class:`MovesDistributionBounds` extends ``_apply``;
tests/agents/test_speed.py checks the bounds follow ``.double()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from iquitos_lightning.fastpath.pins import require

require(nn.Module, ["_apply"], library="torch", override=__name__)


def apply_to_distribution_bounds(root: nn.Module, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Apply a move or cast (the ``fn`` of ``nn.Module._apply``) to the tensors in every module's
    ``distribution_kwargs`` under ``root`` (the TanhNormal's ``low``/``high``).

    Why: TorchRL keeps them in a plain dict, which ``.to(device)`` does not reach, so on a GPU every
    distribution the actor built copied its bounds from the host: one copy per forward in eager, and an
    error inside a CUDA graph (torch 2.11 refuses unpinned host copies during capture; seen on an H200).
    """
    for module in root.modules():
        kwargs = getattr(module, "distribution_kwargs", None)
        if isinstance(kwargs, dict):
            for key, value in kwargs.items():
                if isinstance(value, torch.Tensor):
                    kwargs[key] = fn(value)


class MovesDistributionBounds:
    """Mixin (before ``nn.Module`` or a subclass of it): ``_apply`` also moves or casts the distribution bounds."""

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        moved = super()._apply(fn, recurse)
        apply_to_distribution_bounds(self, fn)
        return moved
