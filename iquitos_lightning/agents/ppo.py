"""Proximal Policy Optimization (Schulman et al. 2017) on TorchRL's ``ClipPPOLoss`` and ``GAE``.

Read like CleanRL's ``ppo_continuous_action.py``: the ``__init__`` arguments are the
hyperparameters, :meth:`PPO.learn` is what happens to each on-policy rollout (advantages by GAE,
then ``epochs`` passes over shuffled minibatches), :meth:`PPO.update` is one clipped-surrogate
gradient step. Plumbing (collector, frame budget, evaluation, checkpoints) is the base's.
Optimization is manual because one rollout gives many optimizer steps; gradients are clipped in
:meth:`on_before_optimizer_step`, where Lightning's precision plugin has already unscaled them.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torch.optim import Adam
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from iquitos_lightning.agents.base import RLAgent, RolloutConfig
from iquitos_lightning.agents.networks import initialise_lazy, make_actor, make_state_value
from iquitos_lightning.agents.speed import SpeedConfig
from iquitos_lightning.envs.factory import EnvConfig
from iquitos_lightning.errors import ConfigError


class PPO(RLAgent):
    """PPO with clipped surrogate, GAE advantages and a separate value network.

    Args:
        env: which environment (site or Gymnasium id) and its seeds.
        rollout: frame budget, frames per rollout (``frames_per_batch`` = CleanRL's ``num_steps``),
            evaluation period and episodes.
        hidden_sizes: hidden layers of the actor and of the value network.
        activation: hidden activation ("tanh" as in the PPO paper, or "relu", "elu", "silu").
        lr: Adam learning rate (actor and critic together).
        gamma: discount factor.
        gae_lambda: GAE's lambda (bias/variance of the advantage).
        clip_epsilon: surrogate clipping range.
        epochs: passes over each rollout.
        minibatch_size: transitions per gradient step.
        entropy_coef: weight of the entropy bonus (0 disables it).
        critic_coef: weight of the value loss.
        max_grad_norm: global gradient-norm clip (0 disables it).
        normalize_advantage: standardise advantages per minibatch.
        reward_scale: rewards are multiplied by this before learning (evaluation returns stay unscaled).
        speed: fast-path switches of the update step (compile, CUDA graphs, TF32; all off by default).
    """

    algorithm = "ppo"  # the memory model and profile keys it uses (iquitos_lightning.profile.profiles)

    def __init__(
        self,
        env: EnvConfig | None = None,
        rollout: RolloutConfig | None = None,
        hidden_sizes: tuple[int, ...] = (64, 64),
        activation: str = "tanh",
        lr: float = 3e-4,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        clip_epsilon: float = 0.2,
        epochs: int = 10,
        minibatch_size: int = 64,
        entropy_coef: float = 0.0,
        critic_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        normalize_advantage: bool = True,
        reward_scale: float = 1.0,
        speed: SpeedConfig | None = None,
    ) -> None:
        super().__init__(env, rollout, speed)
        frames = self.rollout_config.frames_per_batch
        if not 0 < minibatch_size <= frames:
            raise ConfigError(
                f"model.minibatch_size ({minibatch_size}) must be in [1, model.rollout.frames_per_batch = {frames}]: "
                "minibatches are cut from one rollout"
            )
        if epochs <= 0:
            raise ConfigError(f"model.epochs must be a positive integer, got {epochs}")
        self.automatic_optimization = False
        self.lr = lr
        self.epochs = epochs
        self.minibatch_size = minibatch_size
        self.max_grad_norm = max_grad_norm
        self.reward_scale = reward_scale

        self.actor = make_actor(self.train_env, hidden_sizes, activation)
        self.critic = make_state_value(self.train_env, hidden_sizes, activation)
        initialise_lazy(self.train_env, self.actor, self.critic)
        self.advantage_module = GAE(gamma=gamma, lmbda=gae_lambda, value_network=self.critic, average_gae=False)
        self.loss_module = ClipPPOLoss(
            self.actor,
            self.critic,
            clip_epsilon=clip_epsilon,
            entropy_bonus=entropy_coef > 0,
            entropy_coeff=entropy_coef if entropy_coef > 0 else None,
            critic_coeff=critic_coef,
            loss_critic_type="smooth_l1",
            normalize_advantage=normalize_advantage,
        )

    @property
    def exploration_policy(self):
        return self.actor

    def update_rows(self) -> tuple[int, int]:
        return self.minibatch_size, self.rollout_config.frames_per_batch  # the whole rollout moves, minibatches step

    def fixed_update_shapes(self) -> bool:
        """Every minibatch has the same rows only when the rollout splits evenly (a CUDA graph replays one shape)."""
        return self.rollout_config.frames_per_batch % self.minibatch_size == 0

    def configure_optimizers(self) -> Adam:
        return self.make_adam(self.loss_module.parameters(), self.lr)

    def learn(self, rollout: TensorDictBase) -> dict[str, torch.Tensor | float]:
        """GAE over the rollout, then ``epochs`` passes of shuffled minibatches."""
        data = rollout.exclude("collector").to(self.device)
        data["next", "reward"] = data["next", "reward"] * self.reward_scale
        with torch.no_grad():
            self.advantage_module(data)
        data = data.reshape(-1)  # [envs, time] of a batched env (the twin) -> one pool of transitions
        losses: list[dict[str, torch.Tensor]] = []
        for _ in range(self.epochs):
            for indices in torch.randperm(data.numel(), device=data.device).split(self.minibatch_size):
                losses.append(self.run_update(data[indices]))
        return {key: torch.stack([step[key] for step in losses]).mean() for key in losses[0]}

    def loss_terms(self, batch: TensorDictBase) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The loss terms TorchRL's loss returns (``loss_*``), summed."""
        losses = self.loss_module(batch)
        loss_names = [key for key in losses.keys() if key.startswith("loss_")]
        total = sum(losses[key] for key in loss_names)
        return total, {key: losses[key].detach() for key in loss_names}

    def update(self, minibatch: TensorDictBase) -> dict[str, torch.Tensor]:
        """One gradient step on the clipped surrogate + value loss (+ entropy bonus)."""
        total, metrics = self.compute_losses(minibatch)
        self.apply_gradients(total, metrics, (" + ".join(metrics),))  # skipped if a loss or gradient is non-finite
        return metrics

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.loss_module.parameters(), self.max_grad_norm)
