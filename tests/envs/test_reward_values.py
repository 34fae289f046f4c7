"""Reward values pinned by hand-worked examples, independent of the simulators.

Why: the CityLearn env and the twin call the same reward functions, so twin-equivalence cannot notice a wrong
sign or scale; only numbers worked out by hand can. Each example states its arithmetic.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from iquitos_lightning.envs.env_config import Backend, EnvConfig, TrainingAids
from iquitos_lightning.envs.factory import site_env_options, twin_options
from iquitos_lightning.envs.objectives import (
    DAY,
    MONTH,
    TariffReward,
    TariffWeights,
    check_objective,
    demand_period_starts,
    demand_rate_per_kw,
    month_start_steps,
    next_peak_to_date,
    peak_window_steps,
    stored_energy_shaping,
    tariff_amount,
    tariff_bill,
    tariff_scale,
)
from iquitos_lightning.envs.reward import (
    RewardScales,
    RewardWeights,
    StepOutcome,
    co2_term,
    cost_term,
    ev_term,
    grid_term,
    reward_terms,
    solar_term,
    weighted_reward,
)
from iquitos_lightning.site.config import load_site_config
from iquitos_lightning.site.series import SiteSeries

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"

SCALES = RewardScales(max_import_kw=1000.0, pv_max_kw=200.0, max_price=0.5, max_carbon=0.4, ev_power_kw=100.0)
OUTCOME = StepOutcome(
    grid_import_kw=500.0,
    pv_kw=150.0,
    mall_kw=80.0,
    bess_charge_kw=20.0,
    ev_useful_kwh=30.0,
    departing_unmet_kwh=10.0,
    price_per_kwh=0.25,
    carbon_intensity_kg_per_kwh=0.2,
)


def test_each_thesis_term_has_its_hand_worked_value() -> None:
    assert co2_term(OUTCOME, SCALES) == pytest.approx(-(500 * 0.2) / (1000 * 0.4))  # -0.25
    assert cost_term(OUTCOME, SCALES) == pytest.approx(-(500 * 0.25) / (1000 * 0.5))  # -0.25
    assert solar_term(OUTCOME, SCALES) == pytest.approx(-(150 - (80 + 30 + 20)) / 200)  # -0.1: 20 kW PV wasted
    assert ev_term(OUTCOME, SCALES) == pytest.approx((30 - 10) / 100)  # +0.2
    assert grid_term(OUTCOME, SCALES) == pytest.approx(-((500 / 1000) ** 2))  # -0.25


def test_terms_are_clipped_where_the_docstrings_say() -> None:
    no_waste = StepOutcome(**{**OUTCOME.__dict__, "pv_kw": 50.0})  # PV below the useful sinks: nothing wasted
    assert solar_term(no_waste, SCALES) == 0.0
    stranded = StepOutcome(**{**OUTCOME.__dict__, "ev_useful_kwh": 0.0, "departing_unmet_kwh": 500.0})
    assert ev_term(stranded, SCALES) == -1.0  # -5 clipped to -1


def test_the_step_reward_is_the_weighted_mean_of_the_terms() -> None:
    terms = reward_terms(OUTCOME, SCALES)
    weights = RewardWeights()  # the seed weights: co2 0.50, cost 0.15, solar 0.20, ev 0.10, grid 0.05
    expected = (0.50 * -0.25 + 0.15 * -0.25 + 0.20 * -0.1 + 0.10 * 0.2 + 0.05 * -0.25) / 1.0
    assert weighted_reward(terms, weights) == pytest.approx(expected)  # -0.175
    only_ev = RewardWeights(co2=0, cost=0, solar=0, ev=2.0, grid=0)
    assert weighted_reward(terms, only_ev) == pytest.approx(0.2)  # a mean, not a sum: the weight cancels


def test_serving_an_ev_raises_the_thesis_reward() -> None:
    """The sign that matters most: delivering needed EV energy must pay (the seeds' EV weight is positive)."""
    served = StepOutcome(**{**OUTCOME.__dict__, "ev_useful_kwh": 40.0, "grid_import_kw": 510.0})
    assert weighted_reward(reward_terms(served, SCALES), RewardWeights()) > weighted_reward(
        reward_terms(OUTCOME, SCALES), RewardWeights()
    )


def test_the_tariff_hour_charges_energy_co2_and_only_the_rise_of_the_peak_in_the_window() -> None:
    weights = TariffWeights(co2_price_per_kg=0.05)
    # in the window, peak so far 400 kW, import 500 kW: 500 x 0.3 + 500 x 0.2 x 0.05 + 72.49 x (500 - 400)
    assert tariff_amount(500.0, 0.3, 0.2, 400.0, 1.0, 72.49, weights) == pytest.approx(150 + 5 + 7249)
    # below the peak so far: no demand charge
    assert tariff_amount(300.0, 0.3, 0.2, 400.0, 1.0, 72.49, weights) == pytest.approx(90 + 3)
    # outside the window: no demand charge, and the peak to date does not move
    assert tariff_amount(900.0, 0.3, 0.2, 400.0, 0.0, 72.49, weights) == pytest.approx(270 + 9)
    assert next_peak_to_date(900.0, 400.0, 0.0) == 400.0
    assert next_peak_to_date(500.0, 400.0, 1.0) == 500.0


def test_the_years_bill_charges_each_months_largest_peak_window_import() -> None:
    site = load_site_config(TINY)
    hours = 24 * 59  # January and February 2025
    imports = np.full(hours, 100.0)
    peak = site.grid.peak_start_hour
    imports[peak] = 300.0  # January 1st, in the window
    imports[24 * 40 + peak] = 250.0  # February 10th, in the window
    imports[3] = 900.0  # 03:00, outside the window: not billed as demand
    flows = pd.DataFrame({"grid_import_kw": imports, "price_per_kwh": 0.2, "carbon_intensity_kg_per_kwh": 0.1})
    bill = tariff_bill(flows, site, TariffWeights(co2_price_per_kg=0.05))
    rate = site.grid.demand_charge_per_kw_month
    assert bill["demand_charge"] == pytest.approx(rate * (300 + 250))
    energy, co2 = imports.sum() * 0.2, imports.sum() * 0.1 * 0.05
    assert bill["tariff_cost"] == pytest.approx(energy + rate * 550 + co2)
    assert bill["peak_window_import_kw_mean_monthly"] == pytest.approx((300 + 250) / 2)


def test_the_tariff_calendar_and_scale_by_hand() -> None:
    """Tiny site: year 2025, peak window [18, 23). January has 744 hours, February 672."""
    site = load_site_config(TINY)
    assert np.flatnonzero(month_start_steps(site, 24 * 59 + 1)).tolist() == [0, 744, 744 + 672]
    assert np.flatnonzero(peak_window_steps(site, 48)).tolist() == [18, 19, 20, 21, 22, 42, 43, 44, 45, 46]
    assert tariff_scale(1000.0, 0.5) == 500.0  # largest import x highest price
    assert tariff_scale(0.0, 0.5) == 1e-9  # never a division by zero


def test_the_daily_demand_period_restarts_the_peak_each_midnight_at_a_days_share_of_the_rate() -> None:
    """``demand_period: day`` (a training surrogate): the peak restarts at every midnight, billed at rate x 12 / 365."""
    site = load_site_config(TINY)
    assert np.flatnonzero(demand_period_starts(site, 24 * 3, DAY)).tolist() == [0, 24, 48]
    assert np.flatnonzero(demand_period_starts(site, 24 * 59 + 1, MONTH)).tolist() == [0, 744, 744 + 672]
    rate = site.grid.demand_charge_per_kw_month
    assert demand_rate_per_kw(site, DAY) == pytest.approx(rate * 12 / 365)
    assert demand_rate_per_kw(site, MONTH) == rate
    daily = TariffReward.for_site(site, SCALES, TariffWeights(co2_price_per_kg=0.0), demand_period=DAY)
    # 200 kW in the window on top of a 150 kW peak-to-date: energy 200 x 0.3 plus the day's rate on the 50 kW rise.
    expected = -(200 * 0.3 + rate * 12 / 365 * 50) / daily.scale
    assert daily(200.0, 0.3, 0.5, 150.0, 1.0) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="env.demand_period must be one of"):
        demand_period_starts(site, 24, "week")


def test_the_stored_energy_shaping_is_the_discounted_potentials_difference() -> None:
    # 1,000 kWh valued at 0.4 PEN/kWh: SOC 0.5 -> 0.6 with gamma 0.99 over a scale of 100 PEN.
    assert stored_energy_shaping(0.5, 0.6, 0.4, 1000.0, 0.99, 100.0) == pytest.approx((237.6 - 200.0) / 100.0)
    # Summed with the discount over a charge-then-use cycle it is gamma^T phi(s_T) - phi(s_0): no free reward.
    socs = [0.5, 0.9, 0.9, 0.2, 0.5]
    total = sum(
        0.99**t * stored_energy_shaping(a, b, 0.4, 1000.0, 0.99, 1.0)
        for t, (a, b) in enumerate(zip(socs, socs[1:], strict=False))
    )
    assert total == pytest.approx(0.99**4 * 400 * 0.5 - 400 * 0.5)
    # Evaluations score the objective: the training aid stays out of every evaluation env's options.
    config = EnvConfig(
        objective="thesis", backend=Backend(train="twin"), training=TrainingAids(stored_energy_value=0.62)
    )
    assert twin_options(config)["stored_energy_value"] == 0.62
    assert "stored_energy_value" not in site_env_options(config)


def test_tariff_settings_and_objective_names_are_checked() -> None:
    assert check_objective("tariff") == "tariff" and check_objective("thesis") == "thesis"
    with pytest.raises(ValueError, match="env.objective must be one of"):
        check_objective("money")
    for bad in (-0.01, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="co2_price_per_kg must be finite and >= 0"):
            TariffWeights(co2_price_per_kg=bad)
    assert TariffWeights(co2_price_per_kg=0.0).co2_price_per_kg == 0.0  # no CO2 price is allowed


@pytest.mark.parametrize("as_batch", [np.array, torch.tensor], ids=["numpy", "torch"])
def test_every_term_gives_the_float_values_for_a_batch_of_envs(as_batch) -> None:
    """The twin passes one value per env (numpy or torch): same numbers, and the clips act per env.

    Env 0 is OUTCOME; env 1 wastes no PV (PV 50 kW < sinks 130 kW: solar 0) and strands an EV
    (ev (0 - 500) / 100 = -5, clipped to -1); env 2 delivers more than the sockets' power ((300 - 0) / 100 = 3,
    clipped to +1).
    """
    fields = {name: [value] * 3 for name, value in OUTCOME.__dict__.items()}
    fields["pv_kw"][1] = 50.0
    fields["ev_useful_kwh"][1:] = [0.0, 300.0]
    fields["departing_unmet_kwh"][1:] = [500.0, 0.0]
    batch = StepOutcome(**{name: as_batch(values) for name, values in fields.items()})
    terms = reward_terms(batch, SCALES)
    expected = {
        "co2": [-0.25] * 3,
        "cost": [-0.25] * 3,
        "solar": [-0.1, 0.0, 0.0],  # env 1: PV 50 < sinks 130; env 2: sinks 80 + 300 + 20 absorb all 150 kW
        "ev": [0.2, -1.0, 1.0],
        "grid": [-0.25] * 3,
    }
    for name, values in expected.items():
        assert np.asarray(terms[name]).tolist() == pytest.approx(values), name
    assert type(terms["ev"]) is type(batch.ev_useful_kwh)  # still a batch of the caller's kind


def test_ev_term_clips_a_float_at_plus_one_too() -> None:
    oversupplied = StepOutcome(**{**OUTCOME.__dict__, "ev_useful_kwh": 300.0, "departing_unmet_kwh": 0.0})
    assert ev_term(oversupplied, SCALES) == 1.0  # (300 - 0) / 100 = 3, clipped to +1


@pytest.mark.parametrize("field", ["co2", "cost", "solar", "ev", "grid"])
@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf")])
def test_a_weight_that_is_negative_or_not_finite_is_refused(field, bad) -> None:
    with pytest.raises(ValueError, match=f"reward weight {field} must be finite and >= 0"):
        RewardWeights(**{field: bad})


def test_all_zero_weights_are_refused_and_the_total_is_their_sum() -> None:
    with pytest.raises(ValueError, match="must not all be zero"):
        RewardWeights(co2=0, cost=0, solar=0, ev=0, grid=0)
    assert RewardWeights(co2=1, cost=2, solar=3, ev=4, grid=5).total == 15
    assert RewardWeights(co2=0, cost=0, solar=0, ev=0, grid=0.5).total == 0.5  # one weight alone is enough


def test_the_scales_of_a_site_come_from_its_largest_hour_and_its_equipment() -> None:
    """Tiny site: 3 moto sockets of 2 kW + 1 mototaxi socket of 3 kW = 9 kW of EV power, BESS 84.75 kW,
    PV inverter 100 kW; a hand-made 3-hour series with a 300 kW mall peak, price up to 0.45, carbon up to 0.5."""
    config = load_site_config(TINY)
    hours = np.zeros(3)
    series = SiteSeries(
        config=config,
        pv_kw=np.array([0.0, 80.0, 20.0]),
        mall_kw=np.array([100.0, 300.0, 200.0]),
        price_per_kwh=np.array([0.28, 0.45, 0.28]),
        carbon_intensity_kg_per_kwh=np.array([0.4, 0.5, 0.3]),
        temperature_c=hours,
        humidity_pct=hours,
        ghi_w_m2=hours,
        dni_w_m2=hours,
        dhi_w_m2=hours,
        sessions=pd.DataFrame(),
    )
    scales = RewardScales.for_series(series)
    assert scales.max_import_kw == pytest.approx(300 + 9 + 84.75)  # mall peak + every socket + BESS at full power
    assert scales.pv_max_kw == 100.0
    assert scales.max_price == pytest.approx(0.45)
    assert scales.max_carbon == pytest.approx(0.5)
    assert scales.ev_power_kw == pytest.approx(9.0)
    free = SiteSeries(**{**series.__dict__, "price_per_kwh": np.zeros(3), "carbon_intensity_kg_per_kwh": np.zeros(3)})
    assert RewardScales.for_series(free).max_price == 1e-9  # never a division by zero
    assert RewardScales.for_series(free).max_carbon == 1e-9
    slow = [dataclasses.replace(fleet, charger_kw=0.1) for fleet in config.ev.fleets]  # 4 sockets x 0.1 kW
    slow_site = dataclasses.replace(config, ev=dataclasses.replace(config.ev, fleets=slow))
    assert RewardScales.for_series(SiteSeries(**{**series.__dict__, "config": slow_site})).ev_power_kw == pytest.approx(
        0.4
    )  # below 1 kW the real power still counts (the floor is only against a division by zero)


def test_the_grid_term_is_quadratic() -> None:
    """-(import / max import)^2: 800 of 1000 kW costs 0.64, 200 kW only 0.04 (the example above's 0.5 gives
    0.25, which x / 2 also gives)."""
    for imported, expected in ((800.0, -0.64), (200.0, -0.04)):
        assert grid_term(StepOutcome(**{**OUTCOME.__dict__, "grid_import_kw": imported}), SCALES) == pytest.approx(
            expected
        )


def test_the_tariff_step_reward_is_minus_the_hours_bill_over_the_scale() -> None:
    """TariffReward, what both simulators call: the tiny site's demand charge, default weights, SCALES."""
    site = load_site_config(TINY)
    reward = TariffReward.for_site(site, SCALES)  # no weights given: the default CO2 price, 0.05 PEN/kg
    assert reward.weights == TariffWeights() and TariffWeights().co2_price_per_kg == 0.05
    assert reward.scale == 500.0  # 1000 kW x 0.5 PEN/kWh
    with pytest.raises(dataclasses.FrozenInstanceError):  # shared by every env of a batch: never changed
        reward.scale = 1.0
    rate = site.grid.demand_charge_per_kw_month
    # In the window, peak so far 400 kW, import 500 kW: (150 + 5 + rate x 100) / 500, negated.
    assert reward(500.0, 0.3, 0.2, 400.0, 1.0) == pytest.approx(-(150 + 5 + rate * 100) / 500)
    assert reward(300.0, 0.3, 0.2, 400.0, 0.0) == pytest.approx(-(90 + 3) / 500)  # outside: energy and CO2 only


def test_the_peak_to_date_rises_by_exactly_the_excess_and_never_falls() -> None:
    assert next_peak_to_date(450.0, 400.0, 1.0) == 450.0  # 400 + (450 - 400)
    assert next_peak_to_date(1000.0, 300.0, 1.0) == 1000.0  # 300 + 700 (a remainder, 1000 % 300, would give 400)
    assert next_peak_to_date(400.5, 400.0, 1.0) == 400.5  # a rise of half a kW counts in full
    assert next_peak_to_date(399.5, 400.0, 1.0) == 400.0  # an hour below the peak leaves it
    assert next_peak_to_date(0.0, 0.0, 1.0) == 0.0


def test_the_bill_with_default_weights_of_an_empty_year_and_a_window_ending_early() -> None:
    site = load_site_config(TINY)
    hours = 48
    imports = np.full(hours, 10.0)
    flows = pd.DataFrame({"grid_import_kw": imports, "price_per_kwh": 0.2, "carbon_intensity_kg_per_kwh": 0.1})
    assert tariff_bill(flows, site)["tariff_cost"] == pytest.approx(
        tariff_bill(flows, site, TariffWeights(co2_price_per_kg=0.05))["tariff_cost"]
    )  # no weights given: the default CO2 price
    assert tariff_bill(flows, site)["peak_window_import_kw_mean_monthly"] == 10.0  # two days: one month, not two
    empty = tariff_bill(flows.iloc[:0], site)
    assert empty == {"demand_charge": 0.0, "peak_window_import_kw_mean_monthly": 0.0, "tariff_cost": 0.0}
    early = dataclasses.replace(site, grid=dataclasses.replace(site.grid, peak_start_hour=17, peak_end_hour=21))
    assert np.flatnonzero(peak_window_steps(early, 24)).tolist() == [17, 18, 19, 20]  # 21-23 are outside
