"""Advantage Actor-Critic (Mnih et al. 2016, synchronous) on TorchRL's ``A2CLoss`` and ``GAE``.

The simplest of the three: one gradient step per on-policy rollout (:meth:`A2C.update`), with GAE
advantages (``gae_lambda=1`` gives the classic n-step returns). Plumbing is the base's.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torch.optim import Adam
from torchrl.objectives import A2CLoss
from torchrl.objectives.value import GAE

from iquitos_lightning.agents.base import RLAgent, RolloutConfig
from iquitos_lightning.agents.networks import initialise_lazy, make_actor, make_state_value
from iquitos_lightning.agents.speed import SpeedConfig
from iquitos_lightning.envs.factory import EnvConfig


class A2C(RLAgent):
    """A2C: policy gradient with a learned baseline, one update per rollout.

    Args:
        env: which environment (site or Gymnasium id) and its seeds.
        rollout: frame budget, frames per rollout (one update each), evaluation period and episodes.
        hidden_sizes: hidden layers of the actor and of the value network.
        activation: hidden activation ("tanh", "relu", "elu", "silu").
        lr: Adam learning rate.
        gamma: discount factor.
        gae_lambda: GAE's lambda (1.0: n-step returns).
        entropy_coef: weight of the entropy bonus (0 disables it).
        critic_coef: weight of the value loss.
        max_grad_norm: global gradient-norm clip (0 disables it).
        reward_scale: rewards are multiplied by this before learning (evaluation returns stay unscaled).
        speed: fast-path switches of the update step (compile, CUDA graphs, TF32; all off by default).
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
        super().__init__(env, rollout, speed)
        self.automatic_optimization = False
        self.lr = lr
        self.max_grad_norm = max_grad_norm
        self.reward_scale = reward_scale

        self.actor = make_actor(self.train_env, hidden_sizes, activation)
        self.critic = make_state_value(self.train_env, hidden_sizes, activation)
        initialise_lazy(self.train_env, self.actor, self.critic)
        self.advantage_module = GAE(gamma=gamma, lmbda=gae_lambda, value_network=self.critic, average_gae=False)
        self.loss_module = A2CLoss(
            self.actor,
            self.critic,
            entropy_bonus=entropy_coef > 0,
            entropy_coeff=entropy_coef if entropy_coef > 0 else None,
            critic_coeff=critic_coef,
            loss_critic_type="smooth_l1",
        )

    @property
    def exploration_policy(self):
        return self.actor

    def configure_optimizers(self) -> Adam:
        return self.make_adam(self.loss_module.parameters(), self.lr)

    def learn(self, rollout: TensorDictBase) -> dict[str, torch.Tensor | float]:
        data = rollout.exclude("collector").to(self.device)
        data["next", "reward"] = data["next", "reward"] * self.reward_scale
        with torch.no_grad():
            self.advantage_module(data)
        return self.run_update(data)

    def loss_terms(self, batch: TensorDictBase) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The loss terms TorchRL's loss returns (``loss_*``), summed."""
        losses = self.loss_module(batch)
        loss_names = [key for key in losses.keys() if key.startswith("loss_")]
        total = sum(losses[key] for key in loss_names)
        return total, {key: losses[key].detach() for key in loss_names}

    def update(self, batch: TensorDictBase) -> dict[str, torch.Tensor]:
        """One policy-gradient step with the value baseline over the whole rollout."""
        total, metrics = self.compute_losses(batch)
        self.apply_gradients(total, metrics, (" + ".join(metrics),))  # skipped if a loss or gradient is non-finite
        return metrics

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.loss_module.parameters(), self.max_grad_norm)
