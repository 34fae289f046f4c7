"""The memory estimate counts the networks the agents really build, and refuses with the numbers."""

from __future__ import annotations

import pytest
from jsonargparse import Namespace

from iquitos_lightning.agents import PPO, SAC, EnvConfig
from iquitos_lightning.agents.networks import parameter_count
from iquitos_lightning.agents.replay import bytes_per_transition
from iquitos_lightning.envs.env_config import Episodes
from iquitos_lightning.profile.auto_profile import workload_of
from iquitos_lightning.profile.hardware import GIB
from iquitos_lightning.profile.memory_budget import (
    InsufficientMemory,
    Workload,
    check_device_fits,
    device_estimate,
    mlp_parameters,
    network_shapes,
)

PENDULUM = EnvConfig(name="Pendulum-v1", episodes=Episodes(max_steps=20))


def pendulum_workload(frames_per_batch: int = 100) -> Workload:
    return Workload(observation_dim=3, action_dim=1, transition_bytes=100, frames_per_batch=frames_per_batch)


def test_parameter_count_matches_the_sac_networks_torchrl_builds():
    agent = SAC(env=PENDULUM, hidden_sizes=(48, 32))
    q_value = agent.loss_module.qvalue_network_params.flatten_keys()
    real_trained = parameter_count(agent.actor) + sum(p.numel() for p in q_value.values())  # twin Q stacked
    shapes = network_shapes("sac", pendulum_workload(), (48, 32))
    assert shapes.trained_parameters == real_trained
    assert shapes.target_parameters == sum(p.numel() for p in q_value.values())
    assert mlp_parameters(3, (48, 32), 2) == parameter_count(agent.actor)


@pytest.mark.parametrize("policy_scale", ["parameter", "state"])
def test_parameter_count_matches_the_ppo_networks(policy_scale):
    """With a learned log-std or a state-dependent scale, and in the estimate the agent checks at each fit."""
    agent = PPO(env=PENDULUM, hidden_sizes=(40, 24), policy_scale=policy_scale)
    shapes = network_shapes("ppo", pendulum_workload(), (40, 24), policy_scale)
    assert shapes.trained_parameters == parameter_count(agent.actor, agent.critic)
    own = agent.device_memory_estimate()
    assert own.weights_and_optimizer == device_estimate(shapes, 1, 1, 0).weights_and_optimizer


def test_the_profiles_workload_uses_the_replay_buffers_own_bytes_per_transition():
    workload = workload_of(
        Namespace(env=Namespace(name="Pendulum-v1", episodes=Namespace(max_steps=20)), rollout=None), SAC
    )
    agent = SAC(env=PENDULUM, hidden_sizes=(8,))
    example = agent.train_env.fake_tensordict()
    agent.actor(example)  # the collector stores the policy's outputs too
    assert workload.transition_bytes == bytes_per_transition(example)
    assert (workload.observation_dim, workload.action_dim, workload.frames_per_batch) == (3, 1, 1_000)


def test_refusal_names_the_numbers_and_what_to_lower():
    estimate = device_estimate(network_shapes("sac", pendulum_workload(), (256, 256)), 256, 256, 100)
    assert estimate.total > 512 * 1024**2  # the fixed margin is always there
    check_device_fits(estimate, 8 * GIB, "an RTX 4060", "Lower --model.batch_size.")  # fits: no error
    with pytest.raises(InsufficientMemory, match=r"only 0\.10 GiB is free.*Lower --model.batch_size"):
        check_device_fits(estimate, int(0.1 * GIB), "an RTX 4060", "Lower --model.batch_size.")


@pytest.mark.parametrize(
    ("agent_class", "settings", "rows"),
    [(SAC, {"batch_size": 64}, (64, 64)), (PPO, {"minibatch_size": 32}, (32, 1_000))],
)
def test_the_agents_own_check_estimates_what_the_profile_does(agent_class, settings, rows):
    """On CUDA every fit checks this estimate against the free memory before its first rollout."""
    agent = agent_class(env=PENDULUM, hidden_sizes=(48, 32), **settings)
    algorithm = agent_class.__name__.lower()
    workload = workload_of(
        Namespace(env=Namespace(name="Pendulum-v1", episodes=Namespace(max_steps=20)), rollout=None), agent_class
    )
    shapes = network_shapes(algorithm, workload, (48, 32))
    assert agent.device_memory_estimate() == device_estimate(shapes, *rows, workload.transition_bytes)
