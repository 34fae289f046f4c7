"""Soft Actor-Critic (Haarnoja et al. 2018) on TorchRL's ``SACLoss``: twin Q, automatic entropy, soft targets.

Read top to bottom like CleanRL's ``sac_continuous_action.py``: the hyperparameters are the
``__init__`` arguments (documented below), :meth:`SAC.update` is one gradient step of all three
losses, :meth:`SAC.learn` is what happens to each rollout (store it, then ``updates_per_frame``
updates per new frame once ``init_random_frames`` random frames are in the buffer). The collector,
frame budget, evaluation and checkpoints are the base's (:mod:`iquitos_lightning.agents.base`).

Optimization is manual (three optimizers): one ``manual_backward`` over the summed losses, then
each optimizer steps. ``manual_backward`` and the Lightning optimizers go through the precision
plugin, so ``16-mixed`` on CUDA gets its gradient scaling and unscaling. Stepping the Q optimizer
before the actor's backward would fail: the actor loss reads the Q networks (FACTS.md).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from lightning.pytorch.utilities import rank_zero_info
from tensordict import TensorDictBase
from torch.optim import Adam
from torchrl.objectives import SACLoss

from iquitos_lightning.agents.base import RLAgent, RolloutConfig, as_config
from iquitos_lightning.agents.networks import initialise_lazy, make_actor, make_q_value
from iquitos_lightning.agents.replay import (
    ReplayBufferConfig,
    buffer_contents,
    buffer_footprint,
    check_buffer_config,
    check_footprint,
    make_replay_buffer,
    restore_buffer,
    transition_for_buffer,
)
from iquitos_lightning.agents.speed import SpeedConfig
from iquitos_lightning.envs.factory import EnvConfig
from iquitos_lightning.fastpath.soft_update import ForeachSoftUpdate

# Batches of this many updates are drawn from the buffer and moved to the device at once: one index draw,
# one gather and one host-to-device copy instead of one each per update. The buffer samples uniformly with
# replacement, so a chunk split in batches is distributed as independent batches are.
SAMPLE_CHUNK_UPDATES = 32


class _NonModule:
    """Holds an object that must not become a child module or enter the state_dict."""

    def __init__(self, value: Any) -> None:
        self.value = value


class SAC(RLAgent):
    """SAC with a host-side replay buffer.

    Args:
        env: which environment (site or Gymnasium id) and its seeds.
        rollout: frame budget, frames per collector batch, evaluation period and episodes.
        buffer: replay buffer capacity and storage (host RAM or a memmap file; never the GPU).
        hidden_sizes: hidden layers of the actor and of each Q network.
        activation: hidden activation ("relu", "tanh", "elu", "silu").
        batch_size: transitions per gradient update (sampled on the host, then moved to the device).
        actor_lr, critic_lr, alpha_lr: Adam learning rates of the policy, the twin Q networks and the
            entropy coefficient.
        gamma: discount factor.
        tau: soft target update rate (target <- tau * online + (1 - tau) * target, after each update).
        alpha_init: initial entropy coefficient.
        target_entropy: "auto" (minus the action dimension) or a number.
        updates_per_frame: gradient updates per collected frame (the update-to-data ratio).
        init_random_frames: frames of uniformly random actions before learning starts.
        loss_function: Q regression loss ("l2", "smooth_l1", "l1").
        speed: fast-path switches of the update step (compile, CUDA graphs, TF32; all off by default).
    """

    algorithm = "sac"  # the memory model and profile keys it uses (iquitos_lightning.profile.profiles)
    off_policy = True  # may collect one rollout ahead (rollout.overlap)

    def __init__(
        self,
        env: EnvConfig | None = None,
        rollout: RolloutConfig | None = None,
        buffer: ReplayBufferConfig | None = None,
        hidden_sizes: tuple[int, ...] = (256, 256),
        activation: str = "relu",
        batch_size: int = 256,
        actor_lr: float = 3e-4,
        critic_lr: float = 1e-3,
        alpha_lr: float = 1e-3,
        gamma: float = 0.99,
        tau: float = 0.005,
        alpha_init: float = 1.0,
        target_entropy: float | str = "auto",
        updates_per_frame: float = 1.0,
        init_random_frames: int = 1_000,
        loss_function: str = "l2",
        speed: SpeedConfig | None = None,
    ) -> None:
        super().__init__(env, rollout, speed)
        self.automatic_optimization = False
        self.buffer_config = as_config(ReplayBufferConfig, buffer)
        check_buffer_config(self.buffer_config, batch_size)
        self.batch_size = batch_size
        self.learning_rates = (actor_lr, critic_lr, alpha_lr)
        self.updates_per_frame = updates_per_frame
        self.init_random_frames = init_random_frames

        self.actor = make_actor(self.train_env, hidden_sizes, activation, return_log_prob=False)
        q_value = make_q_value(self.train_env, hidden_sizes, activation)
        initialise_lazy(self.train_env, self.actor, q_value)
        self.loss_module = SACLoss(
            actor_network=self.actor,
            qvalue_network=q_value,
            num_qvalue_nets=2,
            loss_function=loss_function,
            alpha_init=alpha_init,
            action_spec=self.train_env.action_spec,
            target_entropy=target_entropy,
        )
        self.loss_module.make_value_estimator(gamma=gamma)
        # SACLoss creates `_target_entropy` lazily on first read; read it now so a fresh module and a
        # checkpoint have the same keys (FACTS.md: otherwise resuming fails with an unexpected key).
        _ = self.loss_module.target_entropy
        self._target_updater = _NonModule(ForeachSoftUpdate(self.loss_module, tau=tau))  # SoftUpdate, one op

        example = self.train_env.fake_tensordict()
        self.actor(example)
        footprint = buffer_footprint(self.buffer_config, example)
        rank_zero_info(footprint.describe())
        check_footprint(footprint)
        self._replay_buffer = _NonModule(make_replay_buffer(self.buffer_config, batch_size))
        self.update_credit = 0.0  # fractional updates carried to the next rollout

    @property
    def replay_buffer(self):
        return self._replay_buffer.value

    @property
    def exploration_policy(self):
        return self.actor

    def collector_options(self) -> dict[str, Any]:
        return {"init_random_frames": max(self.init_random_frames - self.frames_done, 0)}

    def update_rows(self) -> tuple[int, int]:
        return self.batch_size, self.batch_size

    def configure_optimizers(self) -> list[Adam]:
        # Order matters for checkpoints: actor, critic, alpha.
        loss = self.loss_module
        actor_lr, critic_lr, alpha_lr = self.learning_rates
        actor_params = list(loss.actor_network_params.flatten_keys().values())
        critic_params = list(loss.qvalue_network_params.flatten_keys().values())
        return [
            self.make_adam(actor_params, actor_lr),
            self.make_adam(critic_params, critic_lr),
            self.make_adam([loss.log_alpha], alpha_lr),
        ]

    def learn(self, rollout: TensorDictBase) -> dict[str, torch.Tensor | float]:
        """Store the rollout; once past the random frames, run ``updates_per_frame`` updates per new frame
        (batches drawn :data:`SAMPLE_CHUNK_UPDATES` updates at a time)."""
        self.replay_buffer.extend(transition_for_buffer(rollout))
        if self.frames_done < self.init_random_frames:
            return {"buffer_size": len(self.replay_buffer)}
        self.update_credit += rollout.numel() * self.updates_per_frame
        updates = int(self.update_credit)
        self.update_credit -= updates
        losses: list[dict[str, torch.Tensor]] = []
        size = self.batch_size
        for first in range(0, updates, SAMPLE_CHUNK_UPDATES):
            count = min(SAMPLE_CHUNK_UPDATES, updates - first)
            with warnings.catch_warnings():  # TorchRL warns that the size differs from the buffer's batch_size
                warnings.filterwarnings("ignore", message="Got conflicting batch_sizes")
                chunk = self.replay_buffer.sample(batch_size=count * size)
            chunk = chunk.to(self.device, non_blocking=True)
            for index in range(count):
                losses.append(self.run_update(chunk[index * size : (index + 1) * size]))
        metrics: dict[str, torch.Tensor | float] = {"buffer_size": len(self.replay_buffer)}
        if losses:
            metrics.update({key: torch.stack([step[key] for step in losses]).mean() for key in losses[0]})
        return metrics

    def loss_terms(self, batch: TensorDictBase) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Q regression to the soft Bellman target, policy and entropy-coefficient losses, summed."""
        losses = self.loss_module(batch)
        total = losses["loss_actor"] + losses["loss_qvalue"] + losses["loss_alpha"]
        return total, {
            key: losses[key].detach() for key in ("loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy")
        }

    def update(self, batch: TensorDictBase) -> dict[str, torch.Tensor]:
        """One SAC update: the three losses, one backward, each optimizer steps (actor, critic, alpha), soft targets.

        A non-finite loss or gradient skips the whole update, target networks included.
        """
        total, metrics = self.compute_losses(batch)
        if self.apply_gradients(total, metrics, ("loss_actor", "loss_qvalue", "loss_alpha")):
            self._target_updater.value.step()
        return metrics

    def agent_state(self) -> dict[str, Any]:
        return {"replay_buffer": buffer_contents(self.replay_buffer), "update_credit": self.update_credit}

    def load_agent_state(self, state: dict[str, Any]) -> None:
        self._replay_buffer = _NonModule(make_replay_buffer(self.buffer_config, self.batch_size))
        restore_buffer(self.replay_buffer, state["replay_buffer"])
        self.update_credit = float(state["update_credit"])
