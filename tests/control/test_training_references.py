"""The reference runs' tables a training twin reads (control/training_references.py, envs/reference_tables.py) on
the tiny site: the start peaks are the peak shaver's run of the year (``start_peak: reference``), the reward
baselines make their controller earn 0 and any other action its difference from it (``reward_baseline``), and a twin
that needs a table it was not given is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from iquitos_lightning.agents.site_envs import make_agent_env
from iquitos_lightning.control.peak_shaver import PeakShaver
from iquitos_lightning.control.residual import with_residual
from iquitos_lightning.control.training_references import reference_tables
from iquitos_lightning.envs.actions import FLEET, SELF_CONSUMPTION_WINDOW
from iquitos_lightning.envs.env_config import Backend, EnvConfig, TrainingAids
from iquitos_lightning.envs.factory import make_env
from iquitos_lightning.envs.reference_tables import ReferenceTables
from iquitos_lightning.envs.twin import make_twin

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"  # 7 days: 168 hours


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


def _tables(data_root: Path, **env: object) -> ReferenceTables:
    """The tables of a twin-backend run of the tiny site with ``env`` options."""
    return reference_tables(
        EnvConfig.from_mapping({"site": str(TINY), "backend": {"train": "twin", "data_root": str(data_root)}, **env})
    )


def _run(twin, steps: int) -> None:
    action = TensorDict({"action": torch.zeros(twin.num_envs, twin.action_size)}, batch_size=[twin.num_envs])
    for _ in range(steps):
        twin.step(action)


# ----- start peaks (envs/start_peak.py)
def _shaver_peak_at(data_root: Path, hours: list[int], demand_period: str = "month") -> list[float]:
    """The peak shaver's billed peak-to-date at the start of each of ``hours``: its own run from hour 0."""
    shaver = make_twin(TINY, data_root=data_root, layout=FLEET, objective="tariff", demand_period=demand_period)
    env = with_residual(shaver, PeakShaver(), FLEET)
    env.reset()
    peaks = {}
    for hour in range(max(hours) + 1):
        peaks[hour] = float(shaver.peak_to_date_kw[0])
        env.step(TensorDict({"action": torch.zeros(1, 2)}, batch_size=[1]))
    return [peaks[hour] for hour in hours]


def _observed_peak_kw(twin, observation: torch.Tensor) -> torch.Tensor:
    return observation[:, twin.tables.peak_index]


def test_a_mid_month_start_begins_at_the_shaver_runs_peak_in_state_and_observation(data_root: Path) -> None:
    options = {"num_envs": 4, "start": "staggered", "episode_hours": 24, "objective": "tariff"}
    tables = _tables(data_root, **options)
    assert tables.baseline_rewards is None
    twin = make_twin(TINY, data_root=data_root, references=tables, **options)
    for starts in ([0, 42, 84, 126], [24, 66, 108, 150]):  # the first episodes, then (after 24 h) the next ones
        if starts[0]:
            _run(twin, 24)
        observation = twin.reset()["observation"]
        assert twin.resume_state()["tensors"]["t"].tolist() == starts
        expected = _shaver_peak_at(data_root, starts)
        assert [peak > 0.0 for peak in expected] == [start > 0 for start in starts]  # hour 0 opens the month
        assert twin.peak_to_date_kw.tolist() == expected
        scaled = torch.tensor(expected, dtype=torch.float64) / twin.tables.peak_scale
        assert torch.equal(_observed_peak_kw(twin, observation), scaled.to(torch.float32))
    zero = make_twin(TINY, data_root=data_root, num_envs=4, start="staggered", objective="tariff")  # no table: 0
    observation = zero.reset()["observation"]
    assert zero.peak_to_date_kw.tolist() == [0.0] * 4 and not _observed_peak_kw(zero, observation).any()


def test_random_starts_and_the_daily_demand_period_take_their_own_reference(data_root: Path) -> None:
    options = {"num_envs": 6, "start": "random", "episode_hours": 24, "seed": 1, "objective": "tariff"}
    twin = make_twin(TINY, data_root=data_root, references=_tables(data_root, **options), **options)
    twin.reset()
    starts = twin.resume_state()["tensors"]["t"].tolist()
    expected = _shaver_peak_at(data_root, starts)
    assert twin.peak_to_date_kw.tolist() == expected and max(expected) > 0.0
    # Daily: the peak restarts each midnight; 8 staggered envs start at hours 0, 21, 42...: 21 h is in the window.
    options = {"num_envs": 8, "start": "staggered", "objective": "tariff", "demand_period": "day"}
    daily = make_twin(TINY, data_root=data_root, references=_tables(data_root, **options), **options)
    daily.reset()
    starts = daily.resume_state()["tensors"]["t"].tolist()
    expected = _shaver_peak_at(data_root, starts, "day")
    assert daily.peak_to_date_kw.tolist() == expected and expected[1] > 0.0 and expected[0] == expected[4] == 0.0
    assert expected != _shaver_peak_at(data_root, starts)  # the monthly reference would be another


def test_start_peaks_are_a_twin_training_matter_and_a_twin_without_its_table_is_refused(data_root: Path) -> None:
    # From hour 0 the peak truly is 0, and thesis bills no peak: no reference is run.
    assert _tables(data_root, objective="tariff").start_peaks is None
    assert _tables(data_root, start="staggered").start_peaks is None
    options = {"num_envs": 2, "start": "staggered", "episode_hours": 24, "objective": "tariff"}
    assert _tables(data_root, start_peak="zero", **options).start_peaks is None
    assert (
        reference_tables(EnvConfig(site=str(TINY), backend=Backend(data_root=str(data_root)))).start_peaks is None
    )  # CityLearn
    config = EnvConfig.from_mapping(
        {"site": str(TINY), "backend": {"train": "twin", "data_root": str(data_root)}, **options}
    )
    with pytest.raises(ValueError, match="start_peak: reference"):
        make_env(config)
    assert make_env(config, references=reference_tables(config)).peak_to_date_kw.shape == (2,)
    with pytest.raises(ValueError, match="env.training.start_peak must be one of .*'month'"):
        EnvConfig(training=TrainingAids(start_peak="month"))
    with pytest.raises(ValueError, match="start_peaks must have 168 values"):
        make_twin(TINY, data_root=data_root, references=ReferenceTables(start_peaks=np.zeros(3)))


# ----- reward baselines (envs/reward_baseline.py)
def _rewards(env, action: list[list[float]]) -> np.ndarray:
    """[T, B] the rewards of a year of constant actions (one row of ``action`` per env)."""
    carried, rewards = env.reset(), []  # what a collector carries (the training twin's step count and return)
    for _ in range(168):
        carried["action"] = torch.tensor(action)
        step = env.step(carried)["next"]
        rewards.append(step["reward"][:, 0].numpy())
        carried = step.exclude("reward", "done", "terminated", "truncated")
    return np.stack(rewards).astype(float)


@pytest.mark.parametrize("objective", ["thesis", "tariff"])
def test_the_uncontrolled_controller_earns_zero_and_others_their_difference_from_it(
    data_root: Path, objective: str
) -> None:
    # env 0: the uncontrolled controller (BESS idle, every socket at the top of its band); env 1: a discharging
    # battery and EVs at their minimum, whose raw reward differs from the reference's at most hours
    actions = [[0.0, 1.0], [-0.3, -1.0]]
    options = {"num_envs": 2, "actions": FLEET, "objective": objective}
    tables = _tables(data_root, reward_baseline="uncontrolled", **options)
    twin_options = {"num_envs": 2, "layout": FLEET, "objective": objective}
    raw = _rewards(make_twin(TINY, data_root=data_root, **twin_options), actions)
    relative = _rewards(make_twin(TINY, data_root=data_root, references=tables, **twin_options), actions)
    assert np.abs(raw[:, 1] - raw[:, 0]).max() > 1e-3  # the two controllers' rewards differ: the test can fail
    np.testing.assert_allclose(relative[:, 0], 0.0, atol=1e-5)
    np.testing.assert_allclose(relative[:, 1], raw[:, 1] - raw[:, 0], atol=1e-5)


def test_against_the_rule_the_rule_earns_zero_and_another_action_its_difference(data_root: Path) -> None:
    """``reward_baseline: rule``: the series is the rule's run of the year (the residual wrapper at 0 around it);
    a residual agent at 0 earns 0, the uncontrolled fleet action its own reward minus the rule's."""
    tables = _tables(data_root, actions=FLEET, residual="rule", reward_baseline="rule")
    rule_agent = EnvConfig(
        site=str(TINY),
        layout=FLEET,
        residual="rule",
        backend=Backend(train="twin", data_root=str(data_root)),
        training=TrainingAids(reward_baseline="rule"),
    )
    np.testing.assert_allclose(_rewards(make_agent_env(rule_agent), [[0.0, 0.0]]), 0.0, atol=1e-6)
    fleet = _rewards(make_twin(TINY, data_root=data_root, layout=FLEET), [[0.0, 1.0]])
    against_rule = make_twin(TINY, data_root=data_root, layout=FLEET, references=tables)
    rule = fleet - _rewards(against_rule, [[0.0, 1.0]])
    assert np.abs(rule - fleet).max() > 1e-3
    uncontrolled = _tables(data_root, actions=FLEET, reward_baseline="uncontrolled").baseline_rewards
    np.testing.assert_allclose(rule[:, 0], tables.baseline_rewards, atol=1e-5)
    assert not np.allclose(tables.baseline_rewards, uncontrolled, atol=1e-4)


def test_the_baseline_is_the_year_s_not_the_layout_s(data_root: Path) -> None:
    """A ``self_consumption_window`` twin subtracts the same series: its idle actions with EVs at full power are the
    uncontrolled controller, so it earns 0 too."""
    tables = _tables(data_root, actions=SELF_CONSUMPTION_WINDOW, reward_baseline="uncontrolled")
    twin = make_twin(TINY, data_root=data_root, layout=SELF_CONSUMPTION_WINDOW, references=tables)
    np.testing.assert_allclose(_rewards(twin, [[0.0, 0.0, 0.0, 1.0]]), 0.0, atol=1e-5)


def test_evaluation_and_citylearn_refuse_a_baseline(data_root: Path) -> None:
    tables = _tables(data_root, reward_baseline="uncontrolled")
    with pytest.raises(ValueError, match="evaluation"):
        make_twin(TINY, data_root=data_root, record=True, references=tables)
    config = EnvConfig(
        site=str(TINY),
        backend=Backend(train="twin", data_root=str(data_root)),
        training=TrainingAids(reward_baseline="uncontrolled"),
    )
    with pytest.raises(ValueError, match="reward_baseline: uncontrolled"):
        make_env(config)  # the table was not handed in
    with pytest.raises(ValueError, match="training.reward_baseline: the twin's training aids need backend.train: twin"):
        EnvConfig(site=str(TINY), training=TrainingAids(reward_baseline="uncontrolled"))
    with pytest.raises(ValueError, match="reward_baseline must be one of"):
        EnvConfig(site=str(TINY), backend=Backend(train="twin"), training=TrainingAids(reward_baseline="optimum"))


def test_one_training_env_build_reads_the_site_and_each_training_year_once(data_root: Path, monkeypatch) -> None:
    """The reference runs and the twin share one load (envs/site_data.py ``LoadedSite``): each built folder is read
    back once per env build, where the references and the twin used to load the site and its years each."""
    import iquitos_lightning.envs.site_data as site_data

    loads: list[str] = []
    real_built_site = site_data.built_site

    def counted(site, root):  # the real build, counted by the profile it builds
        build = real_built_site(site, root)
        loads.append(build.series.config.name)
        return build

    monkeypatch.setattr(site_data, "built_site", counted)
    options = {"num_envs": 2, "start": "staggered", "episode_hours": 24, "objective": "tariff"}
    config = EnvConfig.from_mapping(
        {
            "site": str(TINY),
            "backend": {"train": "twin", "data_root": str(data_root)},
            "train_site_seeds": [8, 9],
            **options,
        }
    )
    env = make_agent_env(config)
    assert sorted(loads) == ["tiny", "tiny-seed8", "tiny-seed9"]
    assert env.peak_to_date_kw.shape == (2,) and len(env.years) == 2
