"""Advantage Actor-Critic (Mnih et al. 2016, synchronous) on TorchRL's ``A2CLoss`` (its forward on tensors:
fastpath/lean_a2c_loss.py), one update per rollout.

Everything but the loss is the on-policy layer's (:mod:`.on_policy`): actor and critic, GAE advantages
(``gae_lambda=1`` gives the classic n-step returns), gradient clipping.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from iquitos_lightning.agents.on_policy import OnPolicyAgent
from iquitos_lightning.fastpath.lean_a2c_loss import LeanA2CLoss

ADVANTAGE = "advantage"  # where GAE writes each transition's advantage (TorchRL's default key)


class A2C(OnPolicyAgent):
    """A2C: policy gradient with a learned baseline, one update over each whole rollout.

    Args: those of :class:`~iquitos_lightning.agents.on_policy.OnPolicyAgent` (passed on as ``**kwargs``),
    with A2C's defaults of
        lr: Adam learning rate (7e-4, Stable-Baselines3's).
        gae_lambda: 1.0, the classic n-step returns.
    and
        normalize_advantage: standardise the rollout's advantages before the step (off: Stable-Baselines3's A2C
            default). Why an option: without it the step follows the advantages' mean and scale as the critic has
            them, and a critic that explains little of the returns biases every step the same way; PPO standardises
            its minibatches (its default).
    """

    algorithm = "a2c"  # the memory model and profile keys it uses (iquitos_lightning.profile.profiles)

    def __init__(
        self, *, lr: float = 7e-4, gae_lambda: float = 1.0, normalize_advantage: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(lr=lr, gae_lambda=gae_lambda, **kwargs)
        self.normalize_advantage = normalize_advantage
        self.loss_module = LeanA2CLoss(self.actor, self.critic, **self.loss_options)

    def learn_from(self, data: TensorDictBase) -> dict[str, torch.Tensor]:
        """One policy-gradient step with the value baseline over the whole rollout (its advantages computed)."""
        if self.normalize_advantage:
            data[ADVANTAGE] = standardised(data[ADVANTAGE])
        return self.run_update(data)


def standardised(values: torch.Tensor) -> torch.Tensor:
    """``values`` at mean 0 and standard deviation 1 over the whole rollout (TorchRL's PPO standardises the same way,
    per minibatch)."""
    return (values - values.mean()) / values.std().clamp_min(1e-8)
