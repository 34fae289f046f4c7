"""The critic's hindsight (envs/hindsight.py): the training twin writes the true values of the observation's forecast
columns beside an observation that keeps the past-days forecasts; the critics read it, the actor does not."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from iquitos_lightning.agents import PPO, SAC, EnvConfig, RolloutConfig
from iquitos_lightning.agents.replay import ReplayBufferConfig
from iquitos_lightning.envs.env_config import Backend, TrainingAids
from iquitos_lightning.envs.factory import env_specs
from iquitos_lightning.envs.hindsight import HINDSIGHT, forecast_columns, hindsight_names
from iquitos_lightning.envs.training_twin import make_torchrl_twin
from iquitos_lightning.envs.twin import make_twin
from tests.envs.twin_testkit import OPTIONS, TINY


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.mark.parametrize("objective", ["tariff", "thesis"])
def test_hindsight_is_the_true_coming_day_and_the_observation_keeps_past_days(data_root, objective):
    """Same actions on every twin (they do not read the observation), so all visit the same hours: at every step and
    reset, across episode ends, each hindsight column equals the same-named forecast column of an oracle ``tariff``
    twin (whose observation lists PV and mall 1-24 h ahead), and the training twin's own observation equals the
    past-days twin's. ``thesis`` forecasts 1-3 h in its observation; its hindsight adds the other 21 hours."""
    options = {**OPTIONS, "objective": objective}
    training = make_torchrl_twin(TINY, data_root=data_root, critic_forecasts="oracle", **options)
    oracle = make_twin(TINY, data_root=data_root, forecasts="oracle", **OPTIONS)  # tariff: the whole day listed
    past_days = make_twin(TINY, data_root=data_root, **options)
    names = hindsight_names(training.tables.observation_names)
    listed = forecast_columns(training.tables.observation_names)
    assert names[: len(listed)] == [training.tables.observation_names[index] for index in listed]
    assert len(listed) == (48 if objective == "tariff" else 6)
    assert training.observation_spec[HINDSIGHT].shape[-1] == len(names) == 48  # 24 hours each of PV and mall
    sizing = env_specs(
        EnvConfig(
            site=TINY,
            objective=objective,
            backend=Backend(train="twin"),
            training=TrainingAids(critic_forecasts="oracle"),
        )
    )
    assert sizing.observation_spec[HINDSIGHT].shape[-1] == 48  # sizing sees the same width, nothing built
    columns = [oracle.tables.observation_names.index(name) for name in names]
    steps = 25  # two and a half 10-h episodes per env
    actions = torch.rand(steps, 3, training.action_spec.shape[-1], generator=torch.Generator().manual_seed(0)) * 2 - 1

    def run(env):
        data = env.reset()
        seen = [data.clone()]
        for step in range(steps):
            data["action"] = actions[step]
            data, data = env.step_and_maybe_reset(data)
            seen.append(data.clone())
        return seen

    with torch.no_grad():
        for trained, truth, actual in zip(run(training), run(oracle), run(past_days), strict=True):
            assert torch.equal(trained[HINDSIGHT], truth["observation"][:, columns])
            assert torch.equal(trained["observation"], actual["observation"])
    differs = training.tables.exogenous[:, listed] != oracle.tables.exogenous[:, columns[: len(listed)]]
    assert differs.any()  # the forecasts the actor sees are not the truth


def test_the_critics_read_the_hindsight_and_the_actor_does_not(data_root):
    site = EnvConfig(
        site=TINY,
        backend=Backend(train="twin", num_envs=2, data_root=str(data_root)),
        training=TrainingAids(critic_forecasts="oracle"),
    )
    rollout = RolloutConfig(frames_per_batch=32, eval_every_frames=32)
    sac = SAC(env=site, rollout=rollout, buffer=ReplayBufferConfig(capacity=100), hidden_sizes=(8,), batch_size=8)
    ppo = PPO(env=site, rollout=rollout, hidden_sizes=(8,), minibatch_size=16)
    assert list(sac.loss_module.qvalue_network.in_keys) == ["observation", HINDSIGHT, "action"]
    assert list(ppo.critic.in_keys) == ["observation", HINDSIGHT]
    for agent in (sac, ppo):
        assert HINDSIGHT not in agent.actor.in_keys
    plain_site = EnvConfig(site=TINY, backend=Backend(train="twin", num_envs=2, data_root=str(data_root)))
    plain = PPO(env=plain_site, rollout=rollout, hidden_sizes=(8,), minibatch_size=16)
    assert list(plain.critic.in_keys) == ["observation"]
    assert HINDSIGHT in env_specs(site).observation_spec.keys()  # a run's memory is sized with it


def test_critic_forecasts_are_refused_where_no_twin_trains():
    with pytest.raises(ValueError, match="critic_forecasts"):
        EnvConfig(site=TINY, backend=Backend(train="citylearn"), training=TrainingAids(critic_forecasts="oracle"))
    with pytest.raises(ValueError, match="must be null or 'oracle'"):
        EnvConfig(site=TINY, backend=Backend(train="twin"), training=TrainingAids(critic_forecasts="past_days"))
