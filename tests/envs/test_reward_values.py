"""Reward values pinned by hand-worked examples, independent of the simulators.

Why: the CityLearn env and the twin call the same reward functions, so twin-equivalence cannot notice a wrong
sign or scale; only numbers worked out by hand can. Each example states its arithmetic.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from iquitos_lightning.envs.objectives import TariffWeights, next_peak_to_date, tariff_amount, tariff_bill
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
    site = load_site_config("configs/site/tiny.yaml")
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
