"""The challenge's Gymnasium env (``citylearn_2022/gym_env.py``): its spaces, the information rule (the action of step
k lands on row first + k + 1), that the scored replay shows a policy what training showed it, and that an agent of
the project fits on it through ``EnvConfig(name=...)``."""

from __future__ import annotations

import csv

import gymnasium as gym
import numpy as np
import pytest

from iquitos_lightning.citylearn_2022.dataset import Phase
from iquitos_lightning.citylearn_2022.gym_env import (
    FIVE_BUILDINGS_ID,
    FIVE_TRAINING_BUILDINGS,
    ID_PREFIX,
    WINDOW_HOURS,
    CityLearnChallengeEnv,
)
from iquitos_lightning.citylearn_2022.simulation import run_phase
from iquitos_lightning.experiments.citylearn_2022_agents import PolicyController, score_agent, train_agent

FIVE_ID = ID_PREFIX + FIVE_BUILDINGS_ID


def _policy(observation: np.ndarray) -> np.ndarray:
    """A fixed policy that reads the observation (so a mismatch of observations shows in the actions too): charge
    at midday hours, give back in the evening, scaled by the state of charge."""
    hour_sin, soc = float(observation[0]), observation[2 + 2 * 5 : 2 + 3 * 5]
    return np.clip(-hour_sin * (1.2 - soc), -1.0, 1.0)


def test_spaces_and_registration() -> None:
    env = gym.make(FIVE_ID)
    assert env.spec is not None and env.spec.max_episode_steps == WINDOW_HOURS - 1
    assert env.observation_space.shape == (24,) and env.observation_space.dtype == np.float32
    assert env.action_space.shape == (5,) and env.action_space.dtype == np.float32
    observation, info = env.reset(seed=3)
    assert observation.dtype == np.float32 and env.observation_space.contains(observation)
    assert 0 <= info["start"] <= 24 * 240 - WINDOW_HOURS  # inside the training rows 0-5759
    assert env.reset(seed=3)[1]["start"] == info["start"]  # the window is the seed's
    env.close()


def test_action_of_step_k_lands_on_row_first_plus_k_plus_1() -> None:
    env = CityLearnChallengeEnv(FIVE_TRAINING_BUILDINGS, first=1000, last=1047, window_hours=None)
    observation, info = env.reset(seed=0)
    assert info["start"] == 1000
    rewards, charged_step = [], 4
    for step in range(env.hours - 1):
        action = np.ones(5, np.float32) if step == charged_step else np.zeros(5, np.float32)
        observation, reward, terminated, truncated, info = env.step(action)
        assert info["row"] == 1000 + step + 1
        assert np.isfinite(reward) and np.isfinite(observation).all()
        rewards.append(reward)
        assert truncated == (step == env.hours - 2) and not terminated
    charged = np.array([b.electrical_storage.energy_balance[: env.hours] for b in env.citylearn.buildings])
    # CityLearn's index i is row 1000 + i: only the row after step 4's observation took energy
    assert (charged[:, charged_step + 1] > 0).all()
    assert np.count_nonzero(charged[:, : charged_step + 1]) == 0  # nothing before it (row 1000 idles too)


def test_the_scored_replay_shows_the_policy_what_training_showed_it() -> None:
    """The env and ``run_phase`` + :class:`PolicyController` over the same rows and buildings: the same
    observations at every row, so the same actions and the same net consumption."""
    first, hours = 2000, 48
    env = CityLearnChallengeEnv(FIVE_TRAINING_BUILDINGS, first=first, last=first + hours - 1, window_hours=None)
    observation, _ = env.reset(seed=0)
    trained_on = []
    for _ in range(env.hours - 1):
        trained_on.append(observation)
        observation, *_ = env.step(_policy(observation).astype(np.float32))
    controller = PolicyController(_policy)
    run = run_phase(controller, Phase("rows 2000-2047", FIVE_TRAINING_BUILDINGS, first, first + hours - 1, 1.0))
    assert np.allclose(np.array(controller.observations), np.array(trained_on), atol=1e-5)
    net = np.array([b.net_electricity_consumption[: env.hours] for b in env.citylearn.buildings])
    assert np.allclose(run.control, net, atol=1e-4)


@pytest.mark.timeout(240)
def test_a_tiny_sac_fit_trains_records_its_curve_and_is_scored(tmp_path) -> None:
    trained = train_agent("sac", seed=0, frames=512, out_dir=tmp_path, eval_every=512)
    assert trained.frames == 512 and trained.checkpoint.exists()
    with trained.curve.open() as file:
        rows = list(csv.DictReader(file))
    assert [int(row["frames"]) for row in rows] == [512]  # one evaluation: two 719-hour windows
    assert all(np.isfinite(float(row["episode_return"])) for row in rows)
    scores = score_agent(trained, hours=24)
    assert set(scores) == {"phase 1", "phase 2"}
    assert all(np.isfinite(values["score"]) for values in scores.values())
