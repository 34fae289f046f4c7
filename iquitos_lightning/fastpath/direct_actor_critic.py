"""Calling an on-policy loss's actor and critic on tensors instead of through TorchRL's functional parameters.

Why: TorchRL's on-policy losses (``ClipPPOLoss``, ``A2CLoss``) run the actor and the critic inside
``params.to_module(network)``, which swaps every parameter in and out around each call (about a millisecond a
minibatch at this project's sizes), and build the actor's distribution object to score the actions. When the loss's
parameters are the modules' own (no copies, no target networks), calling the modules directly computes the same
tensors with the same autograd graph. The lean losses (fastpath/lean_ppo_loss.py, fastpath/lean_a2c_loss.py) share this
check (:class:`~.direct_modules.RunsModulesDirectly`) and these calls; each test compares its terms and gradients with
the library's forward bit for bit.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torch.distributions import Distribution

from iquitos_lightning.fastpath.direct_modules import RunsModulesDirectly, parameters_are_modules_own
from iquitos_lightning.fastpath.pins import require
from iquitos_lightning.fastpath.tanh_normal import (
    CachedSquashingBounds,
    distribution_parameters,
    network_then_distribution,
    samples_like_tanh_normal,
)
from iquitos_lightning.fastpath.tanh_normal import log_prob as tanh_normal_log_prob


class DirectActorCritic(RunsModulesDirectly):
    """Mixin for a TorchRL loss with ``actor_network`` and ``critic_network`` (put it before the loss class)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        require(self, ["actor_network_params", "critic_network_params"], library="torchrl", override=__name__)
        self._bounds = CachedSquashingBounds()

    def _direct_log_prob(self, tensordict: TensorDictBase) -> torch.Tensor:
        """The actor's log-probability of the batch's actions: for a TanhNormal actor its own operations without
        building the distribution (:func:`~iquitos_lightning.fastpath.tanh_normal.log_prob`, ~0.2 ms a 512-row
        minibatch, equal bit for bit: tests/fastpath/test_tanh_normal.py), else through :meth:`_direct_policy`."""
        action = tensordict.get(self.tensor_keys.action)
        if torch.compiler.is_compiling() or not samples_like_tanh_normal(self.actor_network):
            return self._direct_policy(tensordict).log_prob(action)  # (compiled: the graph it compiled to before)
        parameters = self._actor_parameters(tensordict)
        bounds = self._bounds(self.actor_network.module[-1].distribution_kwargs)
        return tanh_normal_log_prob(parameters["loc"], parameters["scale"], action, bounds)

    def _direct_state_value(self, tensordict: TensorDictBase) -> torch.Tensor:
        """The critic's value at the batch's inputs (its network's module called on the tensors)."""
        critic = self.critic_network
        return critic.module(*(tensordict.get(key) for key in critic.in_keys))

    def _actor_parameters(self, tensordict: TensorDictBase) -> dict[str, torch.Tensor]:
        """The actor's distribution parameters at the batch's inputs (its network called on the tensors)."""
        network = self.actor_network.module[0]
        return distribution_parameters(self.actor_network, *(tensordict.get(key) for key in network.in_keys))

    def _direct_policy(self, tensordict: TensorDictBase) -> Distribution:
        """The actor's distribution on ``tensordict``: its network's module on the input tensors, then the
        distribution class on the outputs, as ``ProbabilisticTensorDictModule.get_dist`` builds it."""
        distribution = self.actor_network.module[-1]
        parameters = self._actor_parameters(tensordict)
        return distribution.distribution_class(**parameters, **distribution.distribution_kwargs)

    def _check_direct(self) -> bool:
        """The loss's parameters are the modules' own (no copies, no target network), the actor is one network then
        one distribution, and the critic one network with one output."""
        actor, critic = self.actor_network, self.critic_network
        if not (network_then_distribution(actor) and isinstance(critic, TensorDictModule)):
            return False
        if list(critic.out_keys) != [self.tensor_keys.value]:
            return False
        if not getattr(self, "functional", True):  # the library itself calls the modules directly then
            return True
        return parameters_are_modules_own([actor, critic], [self.actor_network_params, self.critic_network_params])
