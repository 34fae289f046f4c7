"""TorchRL's ``ClipPPOLoss`` with a forward that computes only what the PPO agent reads.

Why: with 64x64 networks and 512-row minibatches a PPO update is a few hundred small tensor operations, so Python's
cost per operation sets the learner's speed (issue 31). ``ClipPPOLoss.forward`` also computes, for every minibatch,
diagnostics this project does not read (effective sample size, max and mean ratio, approximate KL, the critic's
explained variance; the agent computes its own once per rollout, agents/health.py), copies the input tensordict,
builds its output tensordict and reduces it key by key. Measured on the tariff profile's minibatch (512 rows, 70
inputs, one CPU thread, median of 11): forward and backward 4.97 ms with the library's forward, 3.29 ms with this one.

The loss terms are the library's own computation in the library's own order (its log-weight, advantage
standardisation, clip bounds, critic distance and reduction helpers), so they are equal bit for bit and so are their
gradients (tests/fastpath/test_lean_ppo_loss.py). Every configuration this forward does not cover (a delayed actor,
value clipping, a running advantage norm, a composite action, loss masks, an entropy bonus, another reduction)
goes to the library's forward unchanged.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.utils import distance_loss

from iquitos_lightning.fastpath.direct_actor_critic import DirectActorCritic
from iquitos_lightning.fastpath.pins import require

# What this forward reads of ClipPPOLoss beyond its public API (``_has_critic`` is set in its constructor).
PPO_INTERNALS = ["_critic_loss_inputs", "_standardize_advantage", "_log_weight", "_clip_bounds", "_loss_mask_keys"]
require(ClipPPOLoss, PPO_INTERNALS, library="torchrl", override=__name__)

# The keys the agent reads (agents/on_policy.py ``loss_terms``); the library's forward returns these and more.
LEAN_KEYS = ("loss_objective", "loss_critic", "clip_fraction")


class LeanClipPPOLoss(DirectActorCritic, ClipPPOLoss):
    """``ClipPPOLoss`` whose forward returns ``loss_objective``, ``loss_critic`` and ``clip_fraction`` only (the
    actor and critic called on tensors when their parameters are the loss's own: fastpath/direct_actor_critic.py)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        require(self, ["_has_critic"], library="torchrl", override=__name__)

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
        state_value = self._direct_state_value(tensordict)
        target_return = tensordict.get(self.tensor_keys.value_target)
        target_return, state_value, _ = self._critic_loss_inputs(target_return, state_value, None)
        return self.critic_coeff * distance_loss(target_return, state_value, loss_function=self.loss_critic_type)
