"""The published CityLearn 2022 protocol on slices of its phases, in CityLearn 3.0.2, checked against hand computations.

Why slices: a whole phase takes 10-70 s per controller; the first hours of a phase exercise the same code (the data
in the package, the row alignment, CityLearn's battery, the scoring) in a second or two.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from iquitos_lightning.__main__ import main
from iquitos_lightning.citylearn_2022.controllers import (
    CityLearnRule,
    ModelPredictive,
    NoControl,
    PerfectForesightPlan,
    SelfConsumptionRule,
)
from iquitos_lightning.citylearn_2022.dataset import PHASES, load_data
from iquitos_lightning.citylearn_2022.plan_lp import plan
from iquitos_lightning.citylearn_2022.simulation import run_phase
from iquitos_lightning.experiments.citylearn_2022 import seed_summary
from iquitos_lightning.experiments.citylearn_2022_agents import record_row


class ConstantCharge:
    """Charges every battery by ``share`` of its 5 kW every hour: small enough that nothing limits it for a day."""

    def __init__(self, share: float) -> None:
        self.share = share

    def start(self, phase, env) -> None:
        self.buildings = len(phase.buildings)

    def act(self, row, observation, soc) -> np.ndarray:
        return np.full(self.buildings, self.share)


def test_an_action_lands_on_the_hour_after_the_first_and_the_score_is_the_hand_computed_one():
    phase = PHASES[0].shortened(24)
    run = run_phase(ConstantCharge(0.02), phase)
    data = load_data()
    rows = slice(phase.first, phase.last + 1)
    # the data's own net load (load minus PV at each building's size) is CityLearn's series without storage
    baseline = np.stack([data.load[b][rows] - data.pv(b)[rows] for b in phase.buildings])
    np.testing.assert_allclose(run.baseline, baseline, atol=1e-5)
    # the first hour carries no action (2.2b0's order); every later one draws 0.02 x 5 kW = 0.1 kWh more
    expected = baseline + np.r_[0.0, np.full(23, 0.1)]
    np.testing.assert_allclose(run.control, expected, atol=1e-5)
    # the score by hand: each building's cost and emissions ratio, averaged; the district's grid KPIs
    price, carbon = data.price[rows], data.carbon[rows]
    cost = np.mean([np.clip(c * price, 0, None).sum() / np.clip(b * price, 0, None).sum()
                    for c, b in zip(expected, baseline, strict=True)])  # fmt: skip
    emissions = np.mean([np.clip(c * carbon, 0, None).sum() / np.clip(b * carbon, 0, None).sum()
                         for c, b in zip(expected, baseline, strict=True)])  # fmt: skip
    control_district, baseline_district = expected.sum(axis=0), baseline.sum(axis=0)
    ramping = np.clip(np.diff(control_district), 0, None).sum() / np.clip(np.diff(baseline_district), 0, None).sum()
    load_factor = (1 - control_district.mean() / control_district.max()) / (
        1 - baseline_district.mean() / baseline_district.max()
    )  # one day: one block of 24 h
    peak = control_district.max() / baseline_district.max()  # daily and all-time peak are the same on one day
    grid = (ramping + load_factor + peak + peak) / 4
    assert run.score.score == pytest.approx((cost + emissions + grid) / 3, rel=1e-5)
    assert run.score.score > 1.0  # charging for nothing costs more than no battery


def test_no_control_scores_exactly_one_on_every_phase():
    for phase in PHASES:
        run = run_phase(NoControl(), phase.shortened(30))
        assert all(value == 1.0 for value in run.score.as_dict().values())


def test_cityLearn_rule_charges_in_the_hours_its_observation_says_and_only_then():
    phase = PHASES[1].shortened(30)
    run = run_phase(CityLearnRule(), phase)
    added = (run.control - run.baseline).sum(axis=0)
    hours = (np.arange(phase.first, phase.last + 1) - 1) % 24 + 1  # CityLearn's hour 1..24 of each row
    observed = np.roll(hours, 1)  # the rule acts on the hour before's observation
    charging = (observed >= 6) & (observed <= 14)
    charging[0] = False  # the first hour carries no action
    np.testing.assert_allclose(added[charging], 5 * 0.11 * 5, rtol=1e-4)  # 11 % of 5 kW, five buildings
    assert np.all(added[~charging] <= 1e-9)  # the other hours discharge what the batteries hold, or nothing


def test_the_lp_plan_charges_cheap_and_discharges_dear_within_the_battery():
    net = np.array([[0.2, 0.2, 0.6, 0.6]])
    price = np.array([0.1, 0.1, 0.5, 0.5])
    carbon = np.full(4, 0.1)
    schedule = plan(net, price, carbon, np.zeros(1), block=4)
    assert schedule[0, :2].sum() > 0.1 and schedule[0, 2:].sum() < -0.1
    soc = np.cumsum(np.where(schedule[0] > 0, 0.912 * schedule[0], schedule[0] / 0.912))
    assert soc.min() >= -1e-7 and soc.max() <= 1 + 1e-7
    with pytest.raises(ValueError, match="do not match"):
        plan(net, price[:3], carbon, np.zeros(1))


def test_perfect_foresight_and_mpc_beat_no_control_and_past_days_idles_without_a_past():
    phase = PHASES[0].shortened(48)
    assert run_phase(PerfectForesightPlan(), phase).score.score < 0.9
    assert run_phase(ModelPredictive("perfect"), phase).score.score < 0.9
    persistence = run_phase(ModelPredictive("past_days"), phase)
    # phase 1 starts the year: the first day has no yesterday, so the MPC idles through it
    np.testing.assert_allclose(persistence.control[:, :25], persistence.baseline[:, :25], atol=1e-6)
    assert np.abs(persistence.control[:, 25:] - persistence.baseline[:, 25:]).max() > 0.1
    with pytest.raises(ValueError, match="forecast"):
        ModelPredictive("oracle")


def test_the_command_writes_page_table_json_and_figure_and_refuses_unknown_rows(tmp_path, capsys):
    out = tmp_path / "citylearn-2022"
    (out / "curves").mkdir(parents=True)  # an agent's run, as citylearn_2022_agents --record leaves it
    agent = {"key": "sac_five_s0", "label": "SAC five", "knows": "the hour before", "trained_on": "buildings 6-10",
             "counterpart": None, "phases": [{"phase": "phase 1", "score": 0.95}, {"phase": "phase 2", "score": 0.97}],
             "weighted": None, "weighted_2022": None, "minutes": 9.0, "command": "x", "revision": "y"}  # fmt: skip
    (out / "agents.json").write_text(json.dumps({"rows": [agent]}))
    (out / "curves" / "sac_five_s0.csv").write_text("frames,seconds,episode_return\n100,1,-5\n200,2,-4\n")
    command = ["benchmark", "citylearn-2022", "--rows", "none,rule", "--hours", "30", "--results", str(tmp_path)]
    assert main(command) == 0
    saved = json.loads((out / "scores.json").read_text())
    assert [row["key"] for row in saved["rows"]] == ["none", "rule"] and saved["whole_phases"] is False
    assert saved["rows"][0]["weighted"] == 1.0
    page = (out / "README.md").read_text()
    assert "first 30 hours only" in page and "MPC + LightGBM/persistence average | 0.834" in page
    assert (out / "weighted_scores.png").stat().st_size > 10_000
    assert len((out / "scores.csv").read_text().splitlines()) == 1 + 2 * 3 + 2  # the agent's two phases too
    assert "| SAC five | buildings 6-10 | 0.950 | 0.970 | - | - | - | - | 9.0 |" in page
    assert (out / "learning_curves.png").stat().st_size > 5_000
    assert main(["benchmark", "citylearn-2022", "--rows", "nope"]) == 2
    assert "choose from none, rule" in capsys.readouterr().err


def test_smoothing_trades_objective_for_calmer_actions_from_the_previous_one():
    rng = np.random.default_rng(0)
    net = rng.uniform(-0.3, 0.8, (2, 24))
    price, carbon = rng.uniform(0.1, 0.5, 24), rng.uniform(0.1, 0.3, 24)
    free = plan(net, price, carbon, np.full(2, 0.5), window_form=True)
    calm = plan(net, price, carbon, np.full(2, 0.5), window_form=True, smoothing=1.0, previous_action=free[:, 0])
    changes = lambda schedule: np.abs(np.diff(schedule, axis=1)).sum()  # noqa: E731
    assert changes(calm) < 0.5 * changes(free)


def test_the_self_consumption_rule_stores_the_hour_befores_surplus():
    phase = PHASES[1].shortened(24)
    run = run_phase(SelfConsumptionRule(), phase)
    battery = run.control - run.baseline  # what the batteries drew (+) or gave (-)
    surplus_before = np.minimum(run.baseline[:, :-1], 0.0)  # an exporting building's hour before
    charging = surplus_before < -0.05
    assert charging.any()
    # it charges what was exported the hour before, as far as CityLearn's battery takes it (nothing once it is full)
    stored = battery[:, 1:][charging]
    assert np.all(stored >= -1e-9) and np.all(stored <= -surplus_before[charging] + 1e-6)
    assert np.mean(stored > 0.01) > 0.5


def test_the_seed_summary_averages_whole_runs_per_agent_and_problem_and_skips_partial_ones():
    def run(key: str, scores: tuple[float, ...], weighted: float | None) -> dict:
        phases = [{"phase": f"phase {i + 1}", "score": score} for i, score in enumerate(scores)]
        return {"key": key, "phases": phases, "weighted": weighted}

    agents = [run("ppo_building_s0", (0.9, 0.8, 0.7), 0.77), run("ppo_building_s1", (0.7, 0.8, 0.9), 0.83),
              run("sac_five_s0", (0.9, 0.9), None)]  # fmt: skip
    lines = seed_summary(agents)
    assert lines[-1] == "| ppo_building | 2 | 0.800 | 0.800 | 0.800 | **0.800** | 0.042 | 0.770 - 0.830 |"
    assert not any("sac_five" in line for line in lines) and seed_summary(agents[2:]) == []


def test_an_agent_row_on_every_scored_row_of_the_three_phases_gets_a_weighted_score_and_a_slice_none(tmp_path):
    curve = tmp_path / "curve.csv"
    curve.write_text("frames,seconds,episode_return\n10,1,0.5\n")
    assert [phase.scored_hours for phase in PHASES] == [2880, 2880, 2999]  # CityLearn 3 cannot step row 8759

    def result(seed: int, hours: list[int]) -> dict:
        phases = {
            phase.name: {"score": 0.9, "score_2022": 0.8, "hours": n} for phase, n in zip(PHASES, hours, strict=True)
        }
        return {"agent": "ppo", "problem": "building", "seed": seed, "frames": 10, "policy": "best", "phases": phases,
                "train_seconds": 60.0, "score_seconds": 30.0, "curve": str(curve)}  # fmt: skip

    record = tmp_path / "citylearn-2022" / "agents.json"
    record_row(record, result(0, [2880, 2880, 2999]), "python -m x")
    record_row(record, result(1, [24, 24, 24]), "python -m x --hours")
    rows = {row["key"]: row for row in json.loads(record.read_text())["rows"]}
    assert rows["ppo_building_s0"]["weighted"] == pytest.approx(0.9) and rows["ppo_building_s1"]["weighted"] is None
    assert "best evaluation's weights" in rows["ppo_building_s0"]["label"]
    assert (record.parent / "curves" / "ppo_building_s0.csv").read_text() == curve.read_text()
