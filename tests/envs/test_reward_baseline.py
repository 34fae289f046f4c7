"""``reward_baseline: uncontrolled`` and ``rule`` (envs/reward_baseline.py) on the tiny site: the training reward is
the objective's minus the reference controller's at the same hour, so that controller earns 0 and any other action its
difference from it; evaluation twins and CityLearn refuse it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from iquitos_lightning.envs.actions import FLEET, RULE_RESIDUAL, SELF_CONSUMPTION_WINDOW
from iquitos_lightning.envs.env_config import Backend, EnvConfig, TrainingAids
from iquitos_lightning.envs.twin import make_twin

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"


def _rewards(twin, action: list[list[float]]) -> np.ndarray:
    """[T, B] the rewards of a year of constant actions (one row of ``action`` per env)."""
    twin.reset()
    actions = TensorDict({"action": torch.tensor(action)}, batch_size=[len(action)])
    return np.stack([twin.step(actions)["next", "reward"][:, 0].numpy() for _ in range(twin.hours)]).astype(float)


# (baseline, the layout whose constant action is that controller, that action): the uncontrolled controller is the
# fleet layout's BESS idle with every socket at the top of its band; the rule-based one rule_residual's (0, 0)
REFERENCES = [("uncontrolled", FLEET, [0.0, 1.0]), ("rule", RULE_RESIDUAL, [0.0, 0.0])]


@pytest.mark.parametrize("objective", ["thesis", "tariff"])
@pytest.mark.parametrize(("baseline", "layout", "reference"), REFERENCES)
def test_the_reference_controller_earns_zero_and_others_their_difference_from_it(
    tmp_path: Path, objective: str, baseline: str, layout: str, reference: list[float]
) -> None:
    # env 0: the reference controller; env 1: a discharging battery and EVs at their minimum, whose raw reward
    # differs from the reference's at most hours
    actions = [reference, [-0.3, -1.0]]
    options = {"num_envs": 2, "layout": layout, "objective": objective}
    raw = _rewards(make_twin(TINY, data_root=tmp_path, **options), actions)
    relative = _rewards(make_twin(TINY, data_root=tmp_path, reward_baseline=baseline, **options), actions)
    assert np.abs(raw[:, 1] - raw[:, 0]).max() > 1e-3  # the two controllers' rewards differ: the test can fail
    np.testing.assert_allclose(relative[:, 0], 0.0, atol=1e-5)
    np.testing.assert_allclose(relative[:, 1], raw[:, 1] - raw[:, 0], atol=1e-5)


def test_against_the_rule_another_layout_earns_its_difference_from_the_rule(tmp_path: Path) -> None:
    """The rule's series is the year's: the ``fleet`` layout's uncontrolled action, trained against the rule, earns
    its own reward minus the rule's."""
    rule = _rewards(make_twin(TINY, data_root=tmp_path, layout=RULE_RESIDUAL), [[0.0, 0.0]])
    fleet = _rewards(make_twin(TINY, data_root=tmp_path, layout=FLEET), [[0.0, 1.0]])
    against_rule = make_twin(TINY, data_root=tmp_path, layout=FLEET, reward_baseline="rule")
    assert np.abs(fleet - rule).max() > 1e-3
    np.testing.assert_allclose(_rewards(against_rule, [[0.0, 1.0]]), fleet - rule, atol=1e-5)


def test_the_baseline_is_the_year_s_not_the_layout_s(tmp_path: Path) -> None:
    """A ``self_consumption_window`` twin subtracts the same series: its idle actions with EVs at full power are the
    uncontrolled controller, so it earns 0 too."""
    twin = make_twin(TINY, data_root=tmp_path, layout=SELF_CONSUMPTION_WINDOW, reward_baseline="uncontrolled")
    np.testing.assert_allclose(_rewards(twin, [[0.0, 0.0, 0.0, 1.0]]), 0.0, atol=1e-5)


def test_evaluation_and_citylearn_refuse_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="evaluation"):
        make_twin(TINY, data_root=tmp_path, record=True, reward_baseline="uncontrolled")
    with pytest.raises(ValueError, match="training.reward_baseline: the twin's training aids need backend.train: twin"):
        EnvConfig(
            site=str(TINY), backend=Backend(train="citylearn"), training=TrainingAids(reward_baseline="uncontrolled")
        )
    with pytest.raises(ValueError, match="reward_baseline must be one of"):
        EnvConfig(site=str(TINY), backend=Backend(train="twin"), training=TrainingAids(reward_baseline="optimum"))
