"""An agent's workload: the sizes that decide its memory (:mod:`~iquitos_lightning.profile.memory_budget`).

Why apart from the base: the auto profile asks for them before any agent exists (from the configured arguments and
the env's specs, no site built), and every fit on CUDA asks again to refuse a run that cannot fit before its first
rollout; both read the same three sizes, computed here once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torchrl.envs import EnvBase

from iquitos_lightning.agents.config import RolloutConfig, as_config
from iquitos_lightning.agents.networks import make_actor
from iquitos_lightning.agents.replay import bytes_per_transition
from iquitos_lightning.envs.env_config import EnvConfig
from iquitos_lightning.envs.factory import env_specs
from iquitos_lightning.profile.memory_budget import DeviceEstimate, Workload, device_estimate, network_shapes


def env_workload(env: EnvBase, frames_per_batch: int, actor_log_prob: bool) -> Workload:
    """Observation and action size on ``env``, and the bytes of one stored transition with what the collector stores
    next to it (the actor's outputs): an upper bound, as the replay buffer keeps only what the updates read
    (``stored_keys``; 582 of these 630 B on SAC's tariff profile)."""
    example = env.fake_tensordict()
    with torch.no_grad():
        make_actor(env, (8,), return_log_prob=actor_log_prob)(example)
    return Workload(
        observation_dim=int(example["observation"].shape[-1]),
        action_dim=int(env.action_spec.shape[-1]),
        transition_bytes=bytes_per_transition(example),
        frames_per_batch=frames_per_batch,
    )


def configured_workload(model_args: Mapping[str, Any], actor_log_prob: bool) -> Workload:
    """:func:`env_workload` from an agent's configured arguments: the env's specs read without building a site
    (:func:`~iquitos_lightning.envs.factory.env_specs`)."""
    env = env_specs(as_config(EnvConfig, model_args.get("env")))
    try:
        return env_workload(env, as_config(RolloutConfig, model_args.get("rollout")).frames_per_batch, actor_log_prob)
    finally:
        env.close()


def update_memory(
    algorithm: str, workload: Workload, hparams: Mapping[str, Any], update_rows: tuple[int, int]
) -> DeviceEstimate:
    """Device memory one update of ``algorithm`` needs with these hyperparameters (hidden sizes, policy scale) and
    ``update_rows`` (rows of one backward pass, rows moved to the device per rollout)."""
    hidden, policy_scale = tuple(hparams["hidden_sizes"]), hparams.get("policy_scale", "state")
    shapes = network_shapes(algorithm, workload, hidden, policy_scale)
    return device_estimate(shapes, *update_rows, workload.transition_bytes)
