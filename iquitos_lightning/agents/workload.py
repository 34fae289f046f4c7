"""An agent's workload: the sizes that decide its memory (:mod:`~iquitos_lightning.profile.memory_budget`).

Why apart from the base: the auto profile asks for them before any agent exists (from the configured arguments and
the env's specs, no site built), and every fit on CUDA asks again to refuse a run that cannot fit before its first
rollout; both read the same three sizes, computed here once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch
from torchrl.envs import EnvBase

from iquitos_lightning.agents.config import RolloutConfig, as_config
from iquitos_lightning.agents.networks import make_actor
from iquitos_lightning.agents.replay import bytes_per_transition
from iquitos_lightning.envs.env_config import EnvConfig
from iquitos_lightning.envs.factory import env_specs
from iquitos_lightning.envs.site_data import site_config_of
from iquitos_lightning.envs.twin_device import twin_device_bytes
from iquitos_lightning.profile.memory_budget import DeviceEstimate, Workload, device_estimate, network_shapes


def env_workload(env: EnvBase, frames_per_batch: int, actor_log_prob: bool) -> Workload:
    """Observation and action size on ``env``, and the bytes of one stored transition with what the collector stores
    next to it (the actor's outputs): an upper bound, as the replay buffer keeps only what the updates read
    (``stored_keys``; 582 of these 630 B on SAC's tariff profile)."""
    example = env.fake_tensordict()
    with torch.no_grad():  # on the env's device: a twin moved to the GPU (env.backend.device: training) makes it there
        make_actor(env, (8,), return_log_prob=actor_log_prob).to(example.device)(example)
    return Workload(
        observation_dim=int(example["observation"].shape[-1]),
        action_dim=int(env.action_spec.shape[-1]),
        transition_bytes=bytes_per_transition(example),
        frames_per_batch=frames_per_batch,
    )


def configured_workload(model_args: Mapping[str, Any], actor_log_prob: bool) -> Workload:
    """:func:`env_workload` from an agent's configured arguments: the env's specs read without building a site
    (:func:`~iquitos_lightning.envs.factory.env_specs`)."""
    config = as_config(EnvConfig, model_args.get("env"))
    env = env_specs(config)
    try:
        frames_per_batch = as_config(RolloutConfig, model_args.get("rollout")).frames_per_batch
        workload = env_workload(env, frames_per_batch, actor_log_prob)
    finally:
        env.close()
    if not config.on_twin:
        return workload
    site = site_config_of(config.site)
    years = len(config.training.train_site_seeds or [config.site])
    tables, per_env = twin_device_bytes(
        rows=years * site.hours, sockets=site.ev.socket_count, observation_width=workload.observation_dim
    )
    return dataclasses.replace(workload, twin_table_bytes=tables, twin_bytes_per_env=per_env)


def update_memory(
    algorithm: str, workload: Workload, hparams: Mapping[str, Any], update_rows: tuple[int, int]
) -> DeviceEstimate:
    """Device memory one update of ``algorithm`` needs with these hyperparameters (hidden sizes, policy scale) and
    ``update_rows`` (rows of one backward pass, rows moved to the device per rollout)."""
    hidden, policy_scale = tuple(hparams["hidden_sizes"]), hparams.get("policy_scale", "state")
    shapes = network_shapes(algorithm, workload, hidden, policy_scale)
    return device_estimate(shapes, *update_rows, workload.transition_bytes)
