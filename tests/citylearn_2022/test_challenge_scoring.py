"""The CityLearn 2022 challenge score (CityLearn 2.2b0's district rows) against hand arithmetic, and against the
installed CityLearn 3.0.2's own ``evaluate()`` on the challenge data for the KPIs whose definitions agree."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from iquitos_lightning.citylearn_2022.scoring import (
    ChallengeScore,
    one_minus_load_factor,
    peak,
    ramping,
    score_challenge,
    weighted_phase_score,
)

SCHEMA = (
    Path(__file__).resolve().parents[2]
    / "iquitos_lightning/citylearn_2022/dataset/citylearn_challenge_2022_phase_all/schema.json"
)
# This module's field -> CityLearn 3.0.2's district row of the same definition (module docstring: how they differ).
CITYLEARN_ROWS = {
    "cost": "cost_total",
    "emissions": "carbon_emissions_total",
    "ramping": "ramping_average",
    "daily_one_minus_load_factor": "daily_one_minus_load_factor_average",
    "monthly_one_minus_load_factor": "monthly_one_minus_load_factor_average",
    "daily_peak": "daily_peak_average",
    "all_time_peak": "all_time_peak_average",
}


def _hours(*runs: tuple[float, int]) -> np.ndarray:
    """A series from (value, hours) runs: the hand cases read as a table."""
    return np.concatenate([np.full(count, value, dtype=np.float64) for value, count in runs])


def _hand_case() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """2 buildings x 26 hours: a full day block (hours 0-23) and a short last block (hours 24-25).

    Building 0 (large) shaves its evening; building 1 (small) exports in the evening (net < 0).
    """
    baseline = np.stack([_hours((4, 12), (8, 12), (4, 2)), _hours((1, 26))])
    control = np.stack([_hours((6, 12), (6, 12), (4, 2)), _hours((1, 12), (-1, 12), (2, 2))])
    price = _hours((1, 12), (2, 14))
    carbon = _hours((1, 26))
    return control, baseline, price, carbon


def test_every_kpi_of_the_hand_case() -> None:
    score = score_challenge(*_hand_case())
    # cost, price 1 (h0-11) then 2 (h12-25):
    #   building 0: baseline 12*4*1 + 12*8*2 + 2*4*2 = 256, control 12*6*1 + 12*6*2 + 2*4*2 = 232 -> 29/32
    #   building 1: baseline 12*1 + 12*2 + 2*2 = 40, control 12*1 + 0 (exports earn nothing) + 2*2*2 = 20 -> 1/2
    #   mean of the ratios (29/32 + 1/2) / 2 = 45/64, not the ratio of sums (232 + 20) / (256 + 40) = 63/74
    assert score.cost == pytest.approx(45 / 64, rel=1e-12)
    assert score.cost != pytest.approx(63 / 74)
    # emissions, carbon 1 every hour: building 0 152/152 = 1, building 1 (12 + 0 + 4) / 26 = 8/13
    #   mean (1 + 8/13) / 2 = 21/26, not (152 + 16) / (152 + 26) = 84/89
    assert score.emissions == pytest.approx(21 / 26, rel=1e-12)
    # district: baseline 5 (h0-11), 9 (h12-23), 5 (h24-25); control 7 (h0-11), 5 (h12-23), 6 (h24-25)
    # ramping: baseline +4 at h12, the drop at h24 not counted = 4; control 7 -> 5 not counted, 5 -> 6 = 1 -> 1/4
    assert score.ramping == pytest.approx(1 / 4, rel=1e-12)
    # daily 1 - load factor: baseline block 0 mean 7 max 9 -> 2/9, block 1 [5, 5] -> 0, mean 1/9;
    #   control block 0 mean 6 max 7 -> 1/7, block 1 [6, 6] -> 0, mean 1/14; ratio (1/14) / (1/9) = 9/14
    assert score.daily_one_minus_load_factor == pytest.approx(9 / 14, rel=1e-12)
    # monthly (one block of 26 rows): baseline mean (14*5 + 12*9) / 26 = 89/13, max 9 -> 1 - 89/117 = 28/117;
    #   control mean (12*7 + 12*5 + 2*6) / 26 = 6, max 7 -> 1/7; ratio (1/7) / (28/117) = 117/196
    assert score.monthly_one_minus_load_factor == pytest.approx(117 / 196, rel=1e-12)
    # daily peak, the short block counts as one block: baseline (9 + 5) / 2 = 7, control (7 + 6) / 2 = 13/2 -> 13/14
    assert score.daily_peak == pytest.approx(13 / 14, rel=1e-12)
    assert score.all_time_peak == pytest.approx(7 / 9, rel=1e-12)
    grid = (1 / 4 + 9 / 14 + 13 / 14 + 7 / 9) / 4  # = 655/1008
    assert score.grid == pytest.approx(grid, rel=1e-12)
    assert score.score == pytest.approx((45 / 64 + 21 / 26 + grid) / 3, rel=1e-12)
    grid_2022 = (1 / 4 + 117 / 196) / 2
    assert score.grid_2022 == pytest.approx(grid_2022, rel=1e-12)
    assert score.score_2022 == pytest.approx((45 / 64 + 21 / 26 + grid_2022) / 3, rel=1e-12)


def test_ramping_counts_upward_steps_only_exports_included() -> None:
    # steps +2, -1, -3, +1 (from -1 to 0, while exporting: counted), +4 -> 2 + 1 + 4
    assert ramping(np.array([1.0, 3.0, 2.0, -1.0, 0.0, 4.0])) == 7.0


def test_blocks_start_at_row_0_and_the_short_last_block_weighs_as_much_as_a_full_one() -> None:
    # 30 rows, window 24: block 0 = rows 0-23 (12 x 1 then 12 x 3), block 1 = rows 24-29 (5 x 2 then 4)
    series = _hours((1, 12), (3, 12), (2, 5), (4, 1))
    # 1 - LF: block 0 mean 2 max 3 -> 1/3; block 1 mean 14/6 max 4 -> 5/12; mean (1/3 + 5/12) / 2 = 3/8
    assert one_minus_load_factor(series, 24) == pytest.approx(3 / 8, rel=1e-12)
    # peak: (3 + 4) / 2 = 7/2; a row-weighted mean would give (24*3 + 6*4) / 30 = 16/5, blocks aligned to the end
    # (rows 0-5 and 6-29) (1 + 4) / 2 = 5/2, dropping the short block 3
    assert peak(series, 24) == pytest.approx(7 / 2, rel=1e-12)


def test_control_equal_to_baseline_scores_exactly_one(citylearn_run: dict[str, np.ndarray]) -> None:
    _, baseline, price, carbon = _hand_case()
    hand = score_challenge(baseline, baseline, price, carbon)
    real = score_challenge(
        citylearn_run["baseline"], citylearn_run["baseline"], citylearn_run["price"], citylearn_run["carbon"]
    )
    for result in (hand, real):
        assert result.as_dict() == dict.fromkeys(result.as_dict(), 1.0)


def test_mismatched_shapes_are_refused_naming_them() -> None:
    control, baseline, price, carbon = _hand_case()
    with pytest.raises(ValueError, match=r"control \(2, 26\) and baseline \(2, 25\)"):
        score_challenge(control, baseline[:, :25], price, carbon)
    with pytest.raises(ValueError, match=r"control \(26, 2\) and baseline \(2, 26\)"):
        score_challenge(control.T, baseline, price, carbon)
    with pytest.raises(ValueError, match=r"price \(25,\) and carbon \(26,\) must be \(26,\)"):
        score_challenge(control, baseline, price[:25], carbon)
    with pytest.raises(ValueError, match="carbon has non-finite values"):
        score_challenge(control, baseline, price, np.where(carbon > 0, np.nan, carbon))


def test_a_zero_baseline_denominator_is_refused_naming_the_kpi() -> None:
    control, baseline, price, carbon = _hand_case()
    exporting = baseline.copy()
    exporting[1] = -1.0  # building 1 never imports: its baseline bill is 0
    with pytest.raises(ValueError, match=r"cost \(building 1\): baseline value is 0"):
        score_challenge(control, exporting, price, carbon)
    with pytest.raises(ValueError, match="ramping: baseline value is 0"):
        score_challenge(control, np.ones_like(baseline), price, carbon)  # a flat district never ramps
    # district 0 for hours 0-23 (+1 and -1 cancel) then 1, 2: block 0's peak is 0, its 1 - mean/max is 0/0
    cancelling = np.stack([_hours((1, 26)), _hours((-1, 24), (0, 1), (1, 1))])
    with pytest.raises(ValueError, match="daily_one_minus_load_factor: non-finite value"):
        score_challenge(control, cancelling, price, carbon)


def test_weighted_phase_score_weighs_the_phases_two_three_five() -> None:
    phases = [{"score": 1.0}, {"score": 0.5}, {"score": 0.8}]
    assert weighted_phase_score(phases) == pytest.approx(0.2 * 1.0 + 0.3 * 0.5 + 0.5 * 0.8)  # 0.75
    hand = score_challenge(*_hand_case()).as_dict()
    assert weighted_phase_score([hand, hand, hand], key="score_2022") == pytest.approx(hand["score_2022"])
    with pytest.raises(ValueError, match="needs 3 phases, got 2"):
        weighted_phase_score(phases[:2])


@pytest.fixture(scope="module")
def citylearn_run() -> Iterator[dict[str, np.ndarray]]:
    """200 hours of the challenge data, buildings 1-2, random battery actions, in CityLearn 3.0.2 (offline: the schema
    path sets its root directory; nothing is downloaded). About 5 s, most of it importing citylearn."""
    from citylearn.citylearn import CityLearnEnv

    env = CityLearnEnv(
        str(SCHEMA),
        central_agent=True,
        buildings=["Building_1", "Building_2"],
        simulation_start_time_step=0,
        simulation_end_time_step=199,
    )
    env.reset()
    actions = np.random.default_rng(2022).uniform(-1.0, 1.0, size=(200, env.action_space[0].shape[0]))
    steps = 0
    while not env.terminated:
        env.step([actions[steps].tolist()])
        steps += 1
    first, second = env.buildings
    # A 200-row episode is 199 steps (the final step advances no building): the building series have 199 rows, while
    # price and carbon cover all 200 episode rows. Cut those to the simulated hours, as evaluate() does.
    hours = len(first.net_electricity_consumption)
    assert hours == steps == 199
    np.testing.assert_array_equal(first.pricing.electricity_pricing, second.pricing.electricity_pricing)
    np.testing.assert_array_equal(first.carbon_intensity.carbon_intensity, second.carbon_intensity.carbon_intensity)
    kpis = env.evaluate()
    district = kpis[kpis["level"] == "district"].set_index("cost_function")["value"]
    yield {
        "control": np.stack([b.net_electricity_consumption for b in env.buildings]),
        "baseline": np.stack([b.net_electricity_consumption_without_storage for b in env.buildings]),
        "price": np.asarray(first.pricing.electricity_pricing[:hours]),
        "carbon": np.asarray(first.carbon_intensity.carbon_intensity[:hours]),
        "citylearn": np.array([district[row] for row in CITYLEARN_ROWS.values()]),
    }
    env.close()


def test_agrees_with_citylearn_3_evaluate_on_the_challenge_data(citylearn_run: dict[str, np.ndarray]) -> None:
    score = score_challenge(
        citylearn_run["control"], citylearn_run["baseline"], citylearn_run["price"], citylearn_run["carbon"]
    )
    ours = np.array([getattr(score, field) for field in CITYLEARN_ROWS])
    assert not np.allclose(ours, 1.0, atol=1e-3)  # the batteries moved every KPI: the comparison has teeth
    # 1e-6, not float64 rounding: CityLearn 3.0.2 keeps building net, cost and emission series in float32 and sums the
    # no-storage district series in float32 (measured: largest relative difference 3.6e-8, all_time_peak). A
    # definition that differed (blocks, a short block, down ramps, ratio of sums) moves a KPI by far more.
    np.testing.assert_allclose(ours, citylearn_run["citylearn"], rtol=1e-6, atol=0)
    assert isinstance(score, ChallengeScore)
