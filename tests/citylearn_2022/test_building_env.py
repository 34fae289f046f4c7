"""The battery twin and the per-building env (``citylearn_2022/battery_twin.py``, ``building_env.py``): the twin is
CityLearn's battery (the same net load on random actions), the env trains only on rows and buildings no phase scores,
an idle battery earns nothing, and the scored replay shows the shared policy what training showed it."""

from __future__ import annotations

import numpy as np
import pytest

from iquitos_lightning.citylearn_2022.battery_twin import BatteryTwin, battery_curves
from iquitos_lightning.citylearn_2022.building_env import (
    BUILDING_ID,
    TRAINING_BUILDINGS,
    BuildingBatteryEnv,
    BuildingObservation,
    quadratic_reward,
)
from iquitos_lightning.citylearn_2022.dataset import PHASES, SCHEMA, Phase, load_data
from iquitos_lightning.citylearn_2022.gym_env import TRAIN_ROWS, WINDOW_HOURS
from iquitos_lightning.citylearn_2022.simulation import run_phase
from iquitos_lightning.experiments.citylearn_2022_agents import PolicyController, score_agent, train_agent


def _policy(observation: np.ndarray) -> np.ndarray:
    """A fixed per-building policy that reads its observation: charge at midday, give back in the evening, by the
    state of charge (a batch of observations gives a batch of actions)."""
    observation = np.atleast_2d(observation)
    return np.clip(-observation[:, 0] * (1.2 - observation[:, 4]), -1.0, 1.0)[:, None]


def test_the_twin_draws_what_citylearn_draws_on_random_full_and_held_actions() -> None:
    from citylearn.citylearn import CityLearnEnv

    buildings, first, hours = (6, 11), 100, 160
    env = CityLearnEnv(
        str(SCHEMA), central_agent=True, buildings=[f"Building_{n}" for n in buildings],
        simulation_start_time_step=first, simulation_end_time_step=first + hours,
    )  # fmt: skip
    env.reset()
    actions = np.random.default_rng(0).uniform(-1.2, 1.2, (hours, len(buildings)))
    actions[40:60], actions[60:90] = 1.0, -1.0  # into the power curve's top and back to empty
    twins = [BatteryTwin(battery_curves()[n]) for n in buildings]
    drawn = np.zeros((len(buildings), hours - 1))
    for step in range(hours - 1):
        env.step([actions[step].tolist()])
        drawn[:, step] = [twin.charge(action) for twin, action in zip(twins, actions[step], strict=True)]
    cityLearn = np.array([b.electrical_storage.electricity_consumption[: hours - 1] for b in env.buildings])
    assert np.abs(drawn).max() > 4.0 and (drawn < -1.0).any()  # the batteries moved, both ways
    assert np.allclose(drawn, cityLearn, atol=1e-4)
    soc = np.array([b.electrical_storage.soc[hours - 2] for b in env.buildings])
    assert np.allclose([twin.soc for twin in twins], soc, atol=1e-5)


def test_episodes_stay_inside_the_training_buildings_and_rows_and_an_idle_battery_earns_nothing() -> None:
    env = BuildingBatteryEnv()
    assert env.observation_space.shape == (BuildingObservation.size,) and env.action_space.shape == (1,)
    socs = set()
    for seed in range(8):
        observation, info = env.reset(seed=seed)
        assert info["building"] in TRAINING_BUILDINGS and not set(TRAINING_BUILDINGS) & set(PHASES[0].buildings)
        assert TRAIN_ROWS[0] <= info["start"] <= TRAIN_ROWS[1] + 1 - WINDOW_HOURS
        socs.add(round(float(observation[4]), 6))
    assert len(socs) == 8  # each window starts at its own state of charge
    steps, truncated = 0, False
    while not truncated:
        observation, reward, terminated, truncated, info = env.step(np.array([0.0], np.float32))
        assert reward == 0.0 and not terminated and np.isfinite(observation).all()
        steps += 1
    assert steps == WINDOW_HOURS - 1 and info["row"] == env.start + WINDOW_HOURS - 1


@pytest.mark.parametrize("residual", [False, True])
def test_the_scored_replay_shows_the_shared_policy_what_training_showed_it(residual: bool) -> None:
    """The env on one building's rows and ``run_phase`` + a per-building :class:`PolicyController` on the same
    building and rows: the same observations at every row, so the same actions; the twin's net load is
    CityLearn's."""
    building, first, hours = (9,), 3000, 72
    env = BuildingBatteryEnv(
        building, first=first, last=first + hours - 1, window_hours=hours, residual=residual, random_initial_soc=False
    )
    observation, _ = env.reset(seed=0)
    trained_on, rewards, nets = [], [], []
    for _ in range(hours - 1):
        trained_on.append(observation)
        observation, reward, _, _, info = env.step(_policy(observation)[0].astype(np.float32))
        rewards.append(reward)
        nets.append(info["net"])
    controller = PolicyController(_policy, residual=residual, per_building=True)
    run = run_phase(controller, Phase("rows 3000-3071", building, first, first + hours - 1, 1.0))
    assert np.allclose(np.concatenate(controller.observations), np.array(trained_on), atol=1e-5)
    assert np.allclose(run.control[0, 1:], nets, atol=1e-4)  # the first row idles in both
    assert np.isfinite(rewards).all() and len(set(np.round(rewards, 6))) > 10


def test_the_id_is_registered_for_the_agents(tmp_path) -> None:
    import gymnasium as gym

    env = gym.make("iquitos_lightning.citylearn_2022.building_env:" + BUILDING_ID)
    assert env.spec is not None and env.spec.max_episode_steps == WINDOW_HOURS - 1
    observation, _ = env.reset(seed=1)
    net = load_data().net_load((int(env.unwrapped.buildings[env.unwrapped.index]),), slice(0, 8760))
    assert observation[2] == pytest.approx(net[0, env.unwrapped.start] / 5.0, abs=1e-6)  # the row before the first


@pytest.mark.timeout(240)
def test_a_tiny_ppo_fit_on_one_building_is_scored_on_every_building_of_the_three_phases(tmp_path) -> None:
    trained = train_agent("ppo", seed=0, frames=8_192, out_dir=tmp_path, problem="building", eval_every=8_192)
    assert trained.frames == 8_192 and trained.checkpoint.exists()
    health = (tmp_path / "health.csv").read_text().splitlines()
    assert "approx_kl" in health[0] and len(health) >= 2 and (tmp_path / "health.png").exists()
    scores = score_agent(trained, hours=24)
    assert list(scores) == ["phase 1", "phase 2", "phase 3"]  # one policy, 5 and 15 buildings
    assert all(np.isfinite(values["score"]) and values["hours"] == 24 for values in scores.values())


def test_the_quadratic_reward_prices_the_import_squared_and_an_idle_battery_earns_nothing_on_it() -> None:
    # cost 2 kWh x 0.5 / 0.25 = 4, emissions 2 x 0.1 / 0.1 = 2, import 2^2 / 2 = 2: -(4 + 2 + 2) / 3
    assert quadratic_reward(0.25, 0.1, 2.0, 2.0, 0.5, 0.1) == pytest.approx(-8 / 3)
    assert quadratic_reward(0.25, 0.1, 2.0, -3.0, 0.5, 0.1) == 0.0  # an export costs and emits nothing here
    env = BuildingBatteryEnv(reward="quadratic", residual=False)
    env.reset(seed=0)
    _, reward, *_ = env.step(np.array([0.0], np.float32))
    assert reward == 0.0
    _, reward, *_ = env.step(np.array([1.0], np.float32))  # a full charge from the grid: dearer, and a bigger import
    assert reward < 0.0
    with pytest.raises(ValueError, match="reward 'peak'"):
        BuildingBatteryEnv(reward="peak")
