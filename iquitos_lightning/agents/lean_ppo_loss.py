"""TorchRL's ``ClipPPOLoss`` with a forward that computes only what the PPO agent reads.

Why: with 64x64 networks and 512-row minibatches a PPO update is a few hundred small tensor operations, so Python's
cost per operation sets the learner's speed (issue 31). ``ClipPPOLoss.forward`` also computes, for every minibatch,
diagnostics this project does not read (effective sample size, max and mean ratio, approximate KL, the critic's
explained variance; the agent computes its own once per rollout, agents/health.py), copies the input tensordict,
builds its output tensordict and reduces it key by key. Measured on the tariff profile's minibatch (512 rows, 70
inputs, one CPU thread, median of 11): forward and backward 4.97 ms with the library's forward, 3.29 ms with this one.

The loss terms are the library's own computation in the library's own order (its log-weight, advantage
standardisation, clip bounds, critic distance and reduction helpers), so they are equal bit for bit and so are their
gradients (tests/agents/test_lean_ppo_loss.py). Every configuration this forward does not cover (a delayed actor,
value clipping, a running advantage norm, a composite action, loss masks, an entropy bonus, another reduction)
goes to the library's forward unchanged.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import ProbabilisticTensorDictModule, TensorDictModule
from torch.distributions import Distribution
from torchrl.modules import ProbabilisticActor
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.utils import distance_loss

from iquitos_lightning.fastpath.tanh_normal import (
    CachedSquashingBounds,
    distribution_parameters,
    samples_like_tanh_normal,
)
from iquitos_lightning.fastpath.tanh_normal import log_prob as tanh_normal_log_prob

# The keys the agent reads (agents/on_policy.py ``loss_terms``); the library's forward returns these and more.
LEAN_KEYS = ("loss_objective", "loss_critic", "clip_fraction")


class LeanClipPPOLoss(ClipPPOLoss):
    """``ClipPPOLoss`` whose forward returns ``loss_objective``, ``loss_critic`` and ``clip_fraction`` only."""

    _direct: bool | None = None  # _modules_run_directly's answer, once known

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._bounds = CachedSquashingBounds()

    def _lean_applies(self, tensordict: TensorDictBase) -> bool:
        """Whether this forward equals the library's on ``tensordict`` (else the library's forward runs)."""
        return (
            not self.delay_actor
            and not self.clip_value
            and not self.entropy_bonus
            and self.advantage_norm is None
            and self.reduction == "mean"
            and self._has_critic
            and self.critic_coeff is not None
            and tensordict.get(self.tensor_keys.advantage, None) is not None
            and not any(key in tensordict.keys(True) for key in self._loss_mask_keys())
            and "shifted_valid" not in tensordict.keys()
        )

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self._lean_applies(tensordict):
            return super().forward(tensordict)
        advantage = tensordict.get(self.tensor_keys.advantage)
        if self.normalize_advantage and advantage.numel() > 1:
            advantage = self._standardize_advantage(advantage, tensordict)
        if self._modules_run_directly():
            log_prob = self._direct_log_prob(tensordict)
            log_weight = (log_prob - tensordict.get(self.tensor_keys.sample_log_prob)).unsqueeze(-1)
        else:
            log_weight, _, _, _ = self._log_weight(tensordict, adv_shape=advantage.shape[:-1])
        gain1 = log_weight.exp() * advantage
        log_weight_clip = log_weight.clamp(*self._clip_bounds)
        clip_fraction = (log_weight_clip != log_weight).to(log_weight.dtype).mean()
        gain2 = log_weight_clip.exp() * advantage
        gain = torch.stack([gain1, gain2], -1).min(dim=-1).values
        return TensorDict(
            {
                "loss_objective": (-gain).mean().squeeze(-1),
                "loss_critic": self._lean_critic_loss(tensordict).mean().squeeze(-1),
                "clip_fraction": clip_fraction,
            },
            batch_size=(),
        )

    def _lean_critic_loss(self, tensordict: TensorDictBase) -> torch.Tensor:
        """``critic_coeff`` x the distance of the critic's value to the value target, per row (``loss_critic``'s)."""
        if not self._modules_run_directly():
            return self.loss_critic(tensordict)[0]  # the library's, through the functional parameters
        if self.separate_losses:
            tensordict = tensordict.detach()
        critic = self.critic_network
        state_value = critic.module(*(tensordict.get(key) for key in critic.in_keys))
        target_return = tensordict.get(self.tensor_keys.value_target)
        target_return, state_value, _ = self._critic_loss_inputs(target_return, state_value, None)
        return self.critic_coeff * distance_loss(target_return, state_value, loss_function=self.loss_critic_type)

    def _direct_log_prob(self, tensordict: TensorDictBase) -> torch.Tensor:
        """The actor's log-probability of the minibatch's actions: for a TanhNormal actor its own operations
        without building the distribution (:func:`~iquitos_lightning.fastpath.tanh_normal.log_prob`, ~0.2 ms a
        minibatch, equal bit for bit: tests/fastpath/test_tanh_normal.py), else through :meth:`_direct_policy`."""
        action = tensordict.get(self.tensor_keys.action)
        if torch.compiler.is_compiling() or not samples_like_tanh_normal(self.actor_network):
            return self._direct_policy(tensordict).log_prob(action)  # (compiled: the graph it compiled to before)
        parameters = self._actor_parameters(tensordict)
        bounds = self._bounds(self.actor_network.module[-1].distribution_kwargs)
        return tanh_normal_log_prob(parameters["loc"], parameters["scale"], action, bounds)

    def _actor_parameters(self, tensordict: TensorDictBase) -> dict[str, torch.Tensor]:
        """The actor's distribution parameters at the minibatch's inputs (its network called on the tensors)."""
        network = self.actor_network.module[0]
        return distribution_parameters(self.actor_network, *(tensordict.get(key) for key in network.in_keys))

    def _direct_policy(self, tensordict: TensorDictBase) -> Distribution:
        """The actor's distribution on ``tensordict``: its network's module on the input tensors, then the
        distribution class on the outputs, as ``ProbabilisticTensorDictModule.get_dist`` builds it."""
        distribution = self.actor_network.module[-1]
        parameters = self._actor_parameters(tensordict)
        return distribution.distribution_class(**parameters, **distribution.distribution_kwargs)

    def _apply(self, *args, **kwargs):
        """A move or cast (``.to``, ``.cuda``, ``.double``) may give the functional parameters new tensors: check
        again at the next forward whether they are still the modules' own."""
        self._direct = None
        return super()._apply(*args, **kwargs)

    def _modules_run_directly(self) -> bool:
        """Whether the actor and critic modules may be called on tensors instead of through the functional
        parameters (``to_module``, ~1 ms a minibatch): the loss's parameters are the modules' own (no copies, no
        target network), the actor is one network then one distribution, and the critic one network with one
        output. Checked once."""
        if self._direct is None:
            self._direct = self._check_direct()
        return self._direct

    def _check_direct(self) -> bool:
        actor, critic = self.actor_network, self.critic_network
        if not (isinstance(actor, ProbabilisticActor) and isinstance(critic, TensorDictModule)):
            return False
        if len(actor.module) != 2 or not isinstance(actor.module[-1], ProbabilisticTensorDictModule):
            return False
        if not isinstance(actor.module[0], TensorDictModule) or len(critic.out_keys) != 1:
            return False
        if len(actor.module[0].out_keys) < 2:  # a single output comes back as a tensor, not a tuple
            return False
        if not set(actor.module[-1].in_keys) <= set(actor.module[0].out_keys):
            return False
        if critic.out_keys[0] != self.tensor_keys.value:
            return False
        own = {id(parameter) for parameter in [*actor.parameters(), *critic.parameters()]}
        used = [*self.actor_network_params.values(True, True), *self.critic_network_params.values(True, True)]
        return all(id(parameter) in own for parameter in used)
