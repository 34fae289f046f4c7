"""CityLearn's fast path (fastpath/citylearn_step.py, citylearn_feedback.py): really taken, and changing nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iquitos_lightning.envs.citylearn import IquitosEnv, make_iquitos_env
from iquitos_lightning.fastpath import citylearn_step
from iquitos_lightning.fastpath.citylearn_feedback import record_action_feedback, skips_action_feedback
from iquitos_lightning.fastpath.pins import LibraryChanged, require

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


def _episode(env: IquitosEnv, actions: np.ndarray) -> tuple[list[np.ndarray], list[float]]:
    observations, rewards = [env.reset(seed=0)[0]], []
    for action in actions:
        observation, reward, *_ = env.step(action)
        observations.append(observation)
        rewards.append(reward)
    return observations, rewards


def test_the_pinned_citylearn_takes_the_fast_step(data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With CityLearn 3.0.2 the env never calls the public ``step``, and its feedback records are off."""
    assert citylearn_step.STEP_ONCE_AVAILABLE
    env = make_iquitos_env(TINY, data_root=data_root)
    assert skips_action_feedback(env.citylearn)

    def public_step(*args: object, **kwargs: object) -> None:
        raise AssertionError("the slow public CityLearnEnv.step was called")

    monkeypatch.setattr(env.citylearn, "step", public_step)
    env.reset(seed=0)
    for _ in range(5):
        env.step(np.zeros(env.action_space.shape, dtype=np.float32))
    assert env.time_step == 5


def test_the_fast_path_steps_as_citylearn_itself(data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full episode: fast step without feedback records == the public step with them (observations, rewards, flows).

    Also what happens on a CityLearn without ``_step_once``: the public step (the fallback) runs.
    """
    fast = make_iquitos_env(TINY, data_root=data_root)
    monkeypatch.setattr(citylearn_step, "STEP_ONCE_AVAILABLE", False)
    public = make_iquitos_env(TINY, data_root=data_root)
    record_action_feedback(public.citylearn)
    assert public._transition == public.citylearn.step
    assert not skips_action_feedback(public.citylearn)
    actions = np.random.default_rng(3).uniform(-1.0, 1.0, (fast.hours, fast.action_space.shape[0])).astype(np.float32)
    observations_fast, rewards_fast = _episode(fast, actions)
    observations_public, rewards_public = _episode(public, actions)
    np.testing.assert_array_equal(np.stack(observations_fast), np.stack(observations_public))
    assert rewards_fast == rewards_public
    np.testing.assert_array_equal(fast.flows().to_numpy(), public.flows().to_numpy())
    # The records really were skipped on one side and written on the other.
    assert not any(np.any(charger.action_feedback_requested_power_kw) for charger in fast.chargers)
    assert any(np.any(charger.action_feedback_requested_power_kw) for charger in public.chargers)


def test_a_missing_library_internal_is_refused_naming_the_version() -> None:
    class Renamed:
        def _record_something_else(self) -> None: ...

    with pytest.raises(LibraryChanged, match=r"_record_charger_action_feedback.*citylearn 3\.0\.2"):
        require(Renamed, ["_record_charger_action_feedback"], library="citylearn", override="a test")
