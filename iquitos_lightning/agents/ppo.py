"""Proximal Policy Optimization (Schulman et al. 2017) on TorchRL's ``ClipPPOLoss`` (fastpath/lean_ppo_loss.py).

Read like CleanRL's ``ppo_continuous_action.py``: the ``__init__`` arguments are the hyperparameters,
:meth:`PPO.learn` is what happens to each on-policy rollout (advantages by GAE, then ``epochs`` passes
over shuffled minibatches), each minibatch one clipped-surrogate gradient step. Networks, GAE, the update
step and gradient clipping are the on-policy layer's (:mod:`.on_policy`).
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from iquitos_lightning.agents.on_policy import OnPolicyAgent
from iquitos_lightning.errors import ConfigError
from iquitos_lightning.fastpath.lean_ppo_loss import LeanClipPPOLoss


class PPO(OnPolicyAgent):
    """PPO with clipped surrogate, GAE advantages and a separate value network.

    Args: those of :class:`~iquitos_lightning.agents.on_policy.OnPolicyAgent` (passed on as ``**kwargs``;
    ``frames_per_batch`` of the rollout is CleanRL's ``num_steps``), and
        lr: Adam learning rate (3e-4, CleanRL's).
        gae_lambda: GAE's lambda (0.95, CleanRL's).
        clip_epsilon: surrogate clipping range.
        epochs: passes over each rollout.
        minibatch_size: transitions per gradient step.
        normalize_advantage: standardise advantages per minibatch.
        target_kl: stop a rollout's epochs once the policy has moved this far from the collecting one (the
            approximate KL on the whole rollout after each epoch; SB3's and CleanRL's ``target_kl``); 0: all
            ``epochs`` always.
    """

    algorithm = "ppo"  # the memory model and profile keys it uses (iquitos_lightning.profile.profiles)

    def __init__(
        self,
        *,
        lr: float = 3e-4,
        gae_lambda: float = 0.95,
        clip_epsilon: float = 0.2,
        epochs: int = 10,
        minibatch_size: int = 64,
        normalize_advantage: bool = True,
        target_kl: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(lr=lr, gae_lambda=gae_lambda, **kwargs)
        frames = self.rollout_config.frames_per_batch
        if not 0 < minibatch_size <= frames:
            raise ConfigError(
                f"model.minibatch_size ({minibatch_size}) must be in [1, model.rollout.frames_per_batch = {frames}]: "
                "minibatches are cut from one rollout"
            )
        if epochs <= 0:
            raise ConfigError(f"model.epochs must be a positive integer, got {epochs}")
        if target_kl < 0:
            raise ConfigError(f"model.target_kl must be >= 0 (0: every epoch runs), got {target_kl}")
        self.epochs = epochs
        self.minibatch_size = minibatch_size
        self.target_kl = target_kl
        # TorchRL's ClipPPOLoss, its forward computing only the terms this agent reads (fastpath/lean_ppo_loss.py)
        self.loss_module = LeanClipPPOLoss(
            self.actor,
            self.critic,
            clip_epsilon=clip_epsilon,
            normalize_advantage=normalize_advantage,
            **self.loss_options,
        )

    def update_rows(self) -> tuple[int, int]:
        return self.minibatch_size, self.rollout_config.frames_per_batch  # the whole rollout moves, minibatches step

    def fixed_update_shapes(self) -> bool:
        """Every minibatch has the same rows only when the rollout splits evenly (a CUDA graph replays one shape)."""
        return self.rollout_config.frames_per_batch % self.minibatch_size == 0

    def learn_from(self, data: TensorDictBase) -> dict[str, torch.Tensor]:
        """``epochs`` passes of shuffled minibatches over the rollout (its advantages computed), fewer when the
        policy moved past ``target_kl``."""
        return self.learn_in_minibatches(data, self.epochs, self.minibatch_size, kl_limit=self.target_kl)
