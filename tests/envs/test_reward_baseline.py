"""``reward_baseline: uncontrolled`` and ``rule`` (envs/reward_baseline.py) on the tiny site: the training reward is
the objective's minus the reference controller's at the same hour, so that controller earns 0 and any other action its
difference from it; evaluation twins and CityLearn refuse it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from iquitos_lightning.envs.actions import FLEET, RULE_RESIDUAL, SELF_CONSUMPTION
from iquitos_lightning.envs.factory import EnvConfig
from iquitos_lightning.envs.twin import make_twin

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"


def _rewards(twin, action: list[list[float]]) -> np.ndarray:
    """[T, B] the rewards of a year of constant actions (one row of ``action`` per env)."""
    twin.reset()
    actions = TensorDict({"action": torch.tensor(action)}, batch_size=[len(action)])
    return np.stack([twin.step(actions)["next", "reward"][:, 0].numpy() for _ in range(twin.hours)]).astype(float)


@pytest.mark.parametrize("objective", ["thesis", "tariff"])
def test_the_uncontrolled_action_earns_zero_and_others_their_difference_from_it(tmp_path: Path, objective: str) -> None:
    # env 0: the uncontrolled controller (BESS idle, every socket at the top of its band); env 1: a discharging
    # battery and EVs at their minimum, whose raw reward differs from the uncontrolled one at most hours
    actions = [[0.0, 1.0], [-0.3, -1.0]]
    options = {"num_envs": 2, "action_layout": FLEET, "objective": objective}
    raw = _rewards(make_twin(TINY, data_root=tmp_path, **options), actions)
    relative = _rewards(make_twin(TINY, data_root=tmp_path, reward_baseline="uncontrolled", **options), actions)
    assert np.abs(raw[:, 1] - raw[:, 0]).max() > 1e-3  # the two controllers' rewards differ: the test can fail
    np.testing.assert_allclose(relative[:, 0], 0.0, atol=1e-5)
    np.testing.assert_allclose(relative[:, 1], raw[:, 1] - raw[:, 0], atol=1e-5)


@pytest.mark.parametrize("objective", ["thesis", "tariff"])
def test_the_rule_based_controller_earns_zero_against_the_rule_baseline(tmp_path: Path, objective: str) -> None:
    """``reward_baseline: rule``: the ``rule_residual`` layout's action (0, 0) is the rule-based controller, which
    now earns 0 at every hour; another action earns its difference from the rule, whichever layout plays it."""
    actions = [[0.0, 0.0], [-0.3, -1.0]]
    options = {"num_envs": 2, "action_layout": RULE_RESIDUAL, "objective": objective}
    raw = _rewards(make_twin(TINY, data_root=tmp_path, **options), actions)
    relative = _rewards(make_twin(TINY, data_root=tmp_path, reward_baseline="rule", **options), actions)
    assert np.abs(raw[:, 1] - raw[:, 0]).max() > 1e-3  # the two controllers' rewards differ: the test can fail
    np.testing.assert_allclose(relative[:, 0], 0.0, atol=1e-5)
    np.testing.assert_allclose(relative[:, 1], raw[:, 1] - raw[:, 0], atol=1e-5)
    fleet = _rewards(make_twin(TINY, data_root=tmp_path, action_layout=FLEET, objective=objective), [[0.0, 1.0]])
    against_rule = make_twin(TINY, data_root=tmp_path, action_layout=FLEET, objective=objective, reward_baseline="rule")
    np.testing.assert_allclose(_rewards(against_rule, [[0.0, 1.0]])[:, 0], fleet[:, 0] - raw[:, 0], atol=1e-5)


def test_the_baseline_is_the_year_s_not_the_layout_s(tmp_path: Path) -> None:
    """A ``self_consumption`` twin subtracts the same series: its idle action with EVs at full power is the
    uncontrolled controller, so it earns 0 too."""
    twin = make_twin(TINY, data_root=tmp_path, action_layout=SELF_CONSUMPTION, reward_baseline="uncontrolled")
    np.testing.assert_allclose(_rewards(twin, [[0.0, 1.0]]), 0.0, atol=1e-5)


def test_evaluation_and_citylearn_refuse_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="evaluation"):
        make_twin(TINY, data_root=tmp_path, record=True, reward_baseline="uncontrolled")
    with pytest.raises(ValueError, match="twin backend"):
        EnvConfig(site=str(TINY), backend="citylearn", reward_baseline="uncontrolled")
    with pytest.raises(ValueError, match="reward_baseline must be one of"):
        EnvConfig(site=str(TINY), backend="twin", reward_baseline="optimum")
