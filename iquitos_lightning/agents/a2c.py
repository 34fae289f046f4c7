"""Advantage Actor-Critic (Mnih et al. 2016, synchronous) on TorchRL's ``A2CLoss``: one update per rollout.

Everything but the loss is the on-policy layer's (:mod:`.on_policy`): actor and critic, GAE advantages
(``gae_lambda=1`` gives the classic n-step returns), gradient clipping.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torchrl.objectives import A2CLoss

from iquitos_lightning.agents.config import RolloutConfig
from iquitos_lightning.agents.on_policy import OnPolicyAgent, critic_and_entropy
from iquitos_lightning.agents.speed import SpeedConfig
from iquitos_lightning.envs.factory import EnvConfig


class A2C(OnPolicyAgent):
    """A2C: policy gradient with a learned baseline, one update over each whole rollout.

    Args: those of :class:`~iquitos_lightning.agents.on_policy.OnPolicyAgent`, and
        entropy_coef: weight of the entropy bonus (0 disables it).
        critic_coef: weight of the value loss.
    """

    algorithm = "a2c"  # the memory model and profile keys it uses (iquitos_lightning.profile.profiles)

    def __init__(
        self,
        env: EnvConfig | None = None,
        rollout: RolloutConfig | None = None,
        hidden_sizes: tuple[int, ...] = (64, 64),
        activation: str = "tanh",
        lr: float = 7e-4,
        gamma: float = 0.99,
        gae_lambda: float = 1.0,
        entropy_coef: float = 0.0,
        critic_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        reward_scale: float = 1.0,
        speed: SpeedConfig | None = None,
    ) -> None:
        super().__init__(
            env, rollout, hidden_sizes, activation, lr, gamma, gae_lambda, max_grad_norm, reward_scale, speed
        )
        self.loss_module = A2CLoss(self.actor, self.critic, **critic_and_entropy(entropy_coef, critic_coef))

    def learn(self, rollout: TensorDictBase) -> dict[str, torch.Tensor | float]:
        """One policy-gradient step with the value baseline over the whole rollout."""
        return self.run_update(self.with_advantages(rollout))
