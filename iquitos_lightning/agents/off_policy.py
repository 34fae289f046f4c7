"""The off-policy layer under SAC: a host-side replay buffer, the update-to-data credit, collecting one rollout ahead.

Why a layer: an off-policy agent stores every rollout in a replay buffer and learns from batches sampled
from it, ``updates_per_frame`` updates per new frame once ``init_random_frames`` random frames are in;
the fractional updates a rollout earns are carried to the next (:attr:`OffPolicyAgent.update_credit`, in the
checkpoint with the buffer's filled part). Batches of :data:`SAMPLE_CHUNK_UPDATES` updates are drawn and moved
to the device at once. Because it may learn from older policies' data, it may also collect with
``rollout.overlap`` (the next rollout in a worker while learning from this one). The algorithm on top
provides its networks, ``loss_terms`` and ``update``.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, ClassVar

import torch
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info
from tensordict import NestedKey, TensorDictBase
from torchrl.data import TensorDictReplayBuffer

from iquitos_lightning.agents.base import RLAgent
from iquitos_lightning.agents.config import RolloutConfig, as_config, check_fraction, check_reward_scale
from iquitos_lightning.agents.multi_step import n_step_transitions
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
from iquitos_lightning.envs.env_config import EnvConfig
from iquitos_lightning.errors import ConfigError

# Batches of this many updates are drawn from the buffer and moved to the device at once: one index draw,
# one gather and one host-to-device copy instead of one each per update. The buffer samples uniformly with
# replacement, so a chunk split in batches is distributed as independent batches are.
SAMPLE_CHUNK_UPDATES = 32


class NonModule:
    """Holds an object that must not become a child module or enter the state_dict."""

    def __init__(self, value: Any) -> None:
        self.value = value


class OffPolicyAgent(RLAgent):
    """Replay buffer, update credit and random warm-up; subclasses build networks, then :meth:`create_replay_buffer`.

    Args (shared by off-policy agents):
        buffer: replay buffer capacity and storage (host RAM or a memmap file; never the GPU).
        batch_size: transitions per gradient update (sampled on the host, then moved to the device).
        updates_per_frame: gradient updates per collected frame (the update-to-data ratio).
        init_random_frames: frames of uniformly random actions before learning starts.
        gamma: the discount (of the n-step sums; the loss's value estimator uses the same).
        n_steps: transitions are stored with n-step returns (:mod:`.multi_step`; 1: one-step TD).
        reward_scale: rewards are multiplied by this when stored in the buffer (so the Q targets, n-step sums
            included, are on that scale); the logged episode returns and evaluation stay unscaled.
    """

    off_policy = True  # may collect one rollout ahead (rollout.overlap)
    config_groups: ClassVar[dict[str, type]] = {**RLAgent.config_groups, "buffer": ReplayBufferConfig}

    def __init__(
        self,
        env: EnvConfig | None,
        rollout: RolloutConfig | None,
        buffer: ReplayBufferConfig | None,
        batch_size: int,
        updates_per_frame: float,
        init_random_frames: int,
        speed: SpeedConfig | None,
        gamma: float = 0.99,
        n_steps: int = 1,
        reward_scale: float = 1.0,
    ) -> None:
        if n_steps < 1:
            raise ConfigError(f"model.n_steps must be >= 1, got {n_steps}")
        if not (math.isfinite(updates_per_frame) and updates_per_frame > 0):
            raise ConfigError(f"model.updates_per_frame must be > 0 (updates per env frame), got {updates_per_frame!r}")
        if init_random_frames < 0:
            raise ConfigError(f"model.init_random_frames must be 0 or more, got {init_random_frames}")
        check_reward_scale(reward_scale)
        check_fraction("gamma", gamma, zero_allowed=False)
        super().__init__(env, rollout, speed)
        self.gamma = gamma
        self.n_steps = n_steps
        self.reward_scale = reward_scale
        self.automatic_optimization = False
        self.buffer_config = as_config(ReplayBufferConfig, buffer)
        check_buffer_config(self.buffer_config, batch_size)
        self.batch_size = batch_size
        self.updates_per_frame = updates_per_frame
        self.init_random_frames = init_random_frames
        self.update_credit = 0.0  # fractional updates carried to the next rollout
        self._replay_buffer: NonModule | None = None
        self.saving_policy_only = False  # True while best.ckpt is written: its state leaves the buffer out

    def create_replay_buffer(self) -> None:
        """Size the buffer from one transition of the env with the policy's outputs, refuse it if RAM (or disk)
        cannot hold it, then allocate it (lazily: storage grows as it fills). Call once the networks exist."""
        example = self.train_env.fake_tensordict()
        self.exploration_policy(example)
        footprint = buffer_footprint(self.buffer_config, example, self.stored_keys())
        rank_zero_info(footprint.describe())
        check_footprint(footprint)
        self._replay_buffer = NonModule(make_replay_buffer(self.buffer_config, self.batch_size))

    @property
    def replay_buffer(self) -> TensorDictReplayBuffer:
        return self._replay_buffer.value

    def stored_keys(self) -> list[NestedKey] | None:
        """The entries of a transition the updates and health signals read: all the replay buffer keeps of it
        (replay.transition_for_buffer; None: everything but the collector's bookkeeping)."""
        return None

    def collector_options(self) -> dict[str, Any]:
        """The random frames still to come, in whole rollouts: the collector draws random actions for every rollout
        that starts below its ``init_random_frames`` anyway (and warns on every run when the figure is not a multiple
        of the rollout), so rounding up changes nothing it does."""
        per_rollout = self.rollout_config.frames_per_batch
        remaining = max(self.init_random_frames - self.frames_done, 0)
        return {"init_random_frames": math.ceil(remaining / per_rollout) * per_rollout}

    def update_rows(self) -> tuple[int, int]:
        return self.batch_size, self.batch_size

    def learn(self, rollout: TensorDictBase) -> dict[str, torch.Tensor | float]:
        """Store the rollout (with n-step returns when ``n_steps`` > 1); once past the random frames, run
        ``updates_per_frame`` updates per new frame (batches drawn :data:`SAMPLE_CHUNK_UPDATES` updates at a time)."""
        if self.reward_scale != 1.0:
            rollout = rollout.clone(recurse=False)  # the collector's rollout keeps its own rewards
            rollout["next", "reward"] = rollout["next", "reward"] * self.reward_scale
        transitions = n_step_transitions(rollout, self.gamma, self.n_steps)
        self.replay_buffer.extend(transition_for_buffer(transitions, self.stored_keys()))
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
            # split, not a slice per update: the same views, one call (a slice of the buffer's 16 entries cost ~83 us
            # a batch warm, ~2 % of a SAC update on the CPU; split ~16 us)
            chunk = chunk.to(self.device, non_blocking=True)
            for batch in chunk.split(size):
                losses.append(self.run_update(batch))
        metrics: dict[str, torch.Tensor | float] = {"buffer_size": len(self.replay_buffer)}
        if losses:
            metrics.update({key: torch.stack([step[key] for step in losses]).mean() for key in losses[0]})
            last_batch = chunk[(count - 1) * size : count * size]
            self.health.record(self.batch_health(last_batch))
        return metrics

    def batch_health(self, batch: TensorDictBase) -> dict[str, float]:
        """Health signals (:mod:`.health`) on the rollout's last replay batch, right after its last update (recorded
        in :attr:`~.base.RLAgent.health`)."""
        return {}

    def agent_state(self) -> dict[str, Any]:
        # None while a policy checkpoint (best.ckpt) is written: training/callbacks/best_checkpoint.py
        contents = None if self.saving_policy_only else buffer_contents(self.replay_buffer)
        return {"replay_buffer": contents, "update_credit": self.update_credit}

    def load_agent_state(self, state: dict[str, Any]) -> None:
        self._replay_buffer = NonModule(make_replay_buffer(self.buffer_config, self.batch_size))
        if state["replay_buffer"] is None:
            if self.attached_to_trainer and self.trainer.state.fn == TrainerFn.FITTING:
                raise ConfigError(
                    "this checkpoint holds the policy without its replay buffer (best.ckpt is kept to be tested): "
                    "resume training from last.ckpt (--ckpt_path last), or test this one"
                )
        else:
            restore_buffer(self.replay_buffer, state["replay_buffer"], self.stored_keys())
        self.update_credit = float(state["update_credit"])
