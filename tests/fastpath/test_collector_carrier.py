"""The collector's carried state (fastpath/collector_carrier.py): a new collector on a new twin, given the saved twin
state and carried state, collects exactly the rollouts the original collector would have collected next."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest
import torch
from tensordict import TensorDictBase
from torchrl.collectors import Collector

from iquitos_lightning.agents.collection import make_collector
from iquitos_lightning.agents.networks import initialise_lazy, make_actor
from iquitos_lightning.envs.env_config import Backend, EnvConfig, Episodes, TrainingAids
from iquitos_lightning.envs.factory import make_env, resumes_anywhere
from iquitos_lightning.fastpath.collector_carrier import carried_state, continue_from

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> EnvConfig:
    # 3 envs x 4 steps per rollout; 10-hour episodes from random hours: rollouts end mid-episode and cross resets
    data_root = tmp_path_factory.mktemp("data")
    return EnvConfig(
        site=str(TINY),
        backend=Backend(train="twin", num_envs=3, data_root=str(data_root)),
        episodes=Episodes(seed=2),
        training=TrainingAids(start="random", episode_hours=10),
    )


def _collector(config: EnvConfig, policy):  # noqa: ANN001, ANN202 - the agents' collector of a new twin
    return make_collector(config, make_env(config), policy, frames_per_batch=12, overlap=False)


def _rollouts(collector, count: int) -> list[TensorDictBase]:  # noqa: ANN001
    iterator = iter(collector)
    return [next(iterator).clone() for _ in range(count)]


def _through_a_checkpoint(value: object) -> object:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def test_a_new_collector_given_the_carried_state_collects_the_originals_next_rollouts(config: EnvConfig) -> None:
    torch.manual_seed(0)
    policy = make_actor(make_env(config), (8,))  # samples its actions: the torch RNG is restored below
    initialise_lazy(make_env(config), policy)
    original = _collector(config, policy)
    _rollouts(original, 6)  # 24 steps: every env is 4 steps into its third episode
    saved = _through_a_checkpoint(
        {
            "env": resumes_anywhere(original.env).resume_state(),
            "collector": carried_state(original),
            "rng": torch.get_rng_state(),
        }
    )
    assert saved["collector"]["carrier"]["step_count"].flatten().tolist() == [4, 4, 4]
    expected = _rollouts(original, 4)  # 16 steps more: through each env's next reset

    resumed = _collector(config, policy)  # its construction reset the twin into fresh episodes
    resumes_anywhere(resumed.env).load_resume_state(saved["env"])
    continue_from(resumed, saved["collector"])
    torch.set_rng_state(saved["rng"])
    went_on = _rollouts(resumed, 4)
    for ours, theirs in zip(went_on, expected, strict=True):
        assert set(ours.keys(True, True)) == set(theirs.keys(True, True))
        for key in theirs.keys(True, True):  # step counts and episode rewards included
            assert torch.equal(ours[key], theirs[key]), key
    assert went_on[0]["step_count"][:, 0, 0].tolist() == [4, 4, 4]  # mid-episode, not a fresh start

    only_the_twin = _collector(config, policy)  # the twin's state alone is not enough: the carrier is stale
    resumes_anywhere(only_the_twin.env).load_resume_state(saved["env"])
    torch.set_rng_state(saved["rng"])
    assert not torch.equal(_rollouts(only_the_twin, 1)[0]["observation"], expected[0]["observation"])


def test_a_carried_state_of_another_batch_is_refused_before_anything_changes(config: EnvConfig) -> None:
    collector = _collector(config, None)
    saved = carried_state(collector)
    smaller = dataclasses.replace(config, backend=dataclasses.replace(config.backend, num_envs=2))
    other = _collector(smaller, None)
    before = other._carrier.clone()
    with pytest.raises(ValueError, match="not of this collector's batch"):
        continue_from(other, saved)
    saved["carrier"]["observation"] = saved["carrier"]["observation"][:, :-1]
    with pytest.raises(ValueError, match="'observation' is torch.float32 \\(3, 35\\), this collector's"):
        continue_from(collector, saved)
    assert (other._carrier == before).all()


def test_a_state_carried_with_trajectory_ids_goes_on_in_a_collector_without_them(config: EnvConfig) -> None:
    """Checkpoints saved before the agents' collector stopped tracking trajectory ids carry them: the resumed
    collector drops them and collects what the original would have, on every entry it has."""
    torch.manual_seed(0)
    policy = make_actor(make_env(config), (8,))
    initialise_lazy(make_env(config), policy)
    original = Collector(
        make_env(config),
        policy,
        frames_per_batch=12,
        total_frames=-1,
        track_traj_ids=True,
        auto_register_policy_transforms=False,
    )
    _rollouts(original, 5)
    saved = _through_a_checkpoint(
        {"env": resumes_anywhere(original.env).resume_state(), "collector": carried_state(original),
         "rng": torch.get_rng_state()}
    )  # fmt: skip
    assert "traj_ids" in saved["collector"]["carrier"]["collector"]
    expected = _rollouts(original, 3)

    resumed = _collector(config, policy)
    resumes_anywhere(resumed.env).load_resume_state(saved["env"])
    continue_from(resumed, saved["collector"])
    assert ("collector", "traj_ids") not in resumed._carrier.keys(True, True)  # not carried on from step to step
    torch.set_rng_state(saved["rng"])
    went_on = _rollouts(resumed, 3)
    for ours, theirs in zip(went_on, expected, strict=True):
        assert set(ours.keys(True, True)) == set(theirs.keys(True, True)) - {("collector", "traj_ids")}
        for key in ours.keys(True, True):
            assert torch.equal(ours[key], theirs[key]), key
