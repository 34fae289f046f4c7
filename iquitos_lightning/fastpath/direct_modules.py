"""One mechanism for a TorchRL loss that calls its networks' modules on tensors: when it may, checked once.

Why: the lean losses (:mod:`.lean_sac_loss`, :mod:`.lean_ppo_loss`, :mod:`.lean_a2c_loss`) skip TorchRL's
functional-parameter plumbing (``params.to_module(network)`` around each call) when the loss's parameters are the
modules' own tensors, so calling the modules computes the same values with the same autograd graph. Whether that
holds depends on the loss's construction (copies, target networks, the networks' shapes), so it is checked once,
and again after a move or cast (``.to``, ``.cuda``, ``.double``, which run ``nn.Module._apply``) may have given the
functional parameters new tensors. Each lean loss says what it needs in ``_check_direct``; its equivalence test
compares its terms and gradients with the library's forward bit for bit (tests/fastpath/test_lean_*_loss.py).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from tensordict import TensorDictBase

from iquitos_lightning.fastpath.pins import require

require(torch.nn.Module, ["_apply"], library="torch", override=__name__)


class RunsModulesDirectly:
    """Mixin (before the loss class) caching ``_check_direct``'s answer until the next move or cast."""

    _direct: bool | None = None  # _check_direct's answer, once known

    def _apply(self, *args, **kwargs):
        """``nn.Module._apply``: a move or cast may give the functional parameters new tensors, so check again at
        the next forward."""
        self._direct = None
        self._forget_parameter_caches()
        return super()._apply(*args, **kwargs)

    def _forget_parameter_caches(self) -> None:
        """Drop what the loss keeps keyed on its parameters' tensors (nothing by default)."""

    def _modules_run_directly(self) -> bool:
        """Whether the networks' modules may be called on tensors instead of through the functional parameters."""
        if self._direct is None:
            self._direct = self._check_direct()
        return self._direct

    def _check_direct(self) -> bool:
        raise NotImplementedError


def parameters_are_modules_own(modules: Iterable[torch.nn.Module], parameters: Iterable[TensorDictBase]) -> bool:
    """Whether every tensor of the loss's functional ``parameters`` is a parameter of one of ``modules`` (no copies)."""
    own = {id(parameter) for module in modules for parameter in module.parameters()}
    return all(id(parameter) in own for group in parameters for parameter in group.values(True, True))
