"""The practitioner's MPC (control/robust_mpc.py): its forecasts read only the past, and it runs the tiny site's year
serving every EV at a bill between the optimum's and the rule's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iquitos_lightning.control.robust_mpc import RobustMPCController, RobustSettings, load_settings, past_envelope
from iquitos_lightning.control.site_years import OPTIMUM, RULE, reference_controllers, run_year, year_before, year_env
from iquitos_lightning.envs.objectives import TARIFF, monthly_bill, tariff_bill

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "site" / "tiny.yaml"


def test_the_envelope_is_the_worst_of_the_past_days_at_each_hour_and_never_reads_the_future():
    hours = np.arange(24 * 5, dtype=float)
    values = 100.0 + 10.0 * (hours // 24) + (hours % 24)  # day d, hour h: 100 + 10 d + h
    t = 24 * 3 + 5  # day 3, 05:00
    high = past_envelope(values, t, 30, days=2, worst="max")
    low = past_envelope(values, t, 30, days=2, worst="min")
    # hour t + k (k = 1..23) at the same hour of days 2 and 1: max is day 2's, min day 1's
    k = np.arange(1, 24)
    np.testing.assert_array_equal(high[:23], 100.0 + 20.0 + (5 + k) % 24 + 10.0 * ((5 + k) >= 24))
    np.testing.assert_array_equal(low[:23], 100.0 + 10.0 + (5 + k) % 24 + 10.0 * ((5 + k) >= 24))
    # hours past a day ahead look two days back (the most recent past day): t + 24 + j -> days 2, 1 at 05 + j
    assert high[23] == values[t + 24 - 24] and low[23] == values[t + 24 - 48]
    future = values.copy()
    future[t + 1 :] = 1e9  # what is not yet known cannot change the plan
    np.testing.assert_array_equal(past_envelope(future, t, 30, days=2, worst="max"), high)
    # at the year's first hour no past exists: the value now
    np.testing.assert_array_equal(past_envelope(values, 0, 5, days=3, worst="max"), np.full(4, values[0]))


def test_settings_are_checked_and_read_from_the_tuned_file(tmp_path):
    with pytest.raises(ValueError, match="envelope_days must be 1 or more"):
        RobustSettings(envelope_days=0)
    with pytest.raises(ValueError, match="margins must lie in"):
        RobustSettings(mall_margin=-0.1)
    assert load_settings(tmp_path / "missing.yaml") == RobustSettings()
    path = tmp_path / "tuned.yaml"
    path.write_text(
        "settings: {horizon: 36, envelope_days: 5, mall_margin: 0.05, pv_margin: 0.1, plan_arrivals: true}\n"
    )
    assert load_settings(path) == RobustSettings(36, 5, 0.05, 0.1, True)
    path.write_text("settings: {horizon: 36, hedge: 0.1}\n")
    with pytest.raises(ValueError, match=r"unknown mpc_robust setting\(s\) \['hedge'\]"):
        load_settings(path)


@pytest.fixture(scope="module")
def tiny_year():
    return year_env(TINY, 7)


def test_yesterdays_arrivals_are_planned_again_a_day_later(tiny_year):
    controller = RobustMPCController(tiny_year.series, TARIFF, RobustSettings(horizon=36))
    t = 24 * 3 + 20
    socket, start, end, need = controller._coming_sessions(t, 36)
    recent = np.flatnonzero((controller.arrival > t - 24) & (controller.arrival <= t))
    assert len(recent) > 0
    expected = sorted(controller.arrival[recent] + 24 - t)
    assert sorted(start[start <= 24].tolist()) == [value for value in expected if value < 36]
    assert (start >= 1).all() and (end > start).all() and (need >= 0).all()
    plain = RobustMPCController(tiny_year.series, TARIFF, RobustSettings(plan_arrivals=False))
    assert len(plain._coming_sessions(t, 24)[0]) == 0


def test_the_year_starts_from_the_last_days_of_the_year_before(tiny_year):
    before = year_before(tiny_year.site_config, Path("data"))
    assert before.config.seed == 6 and before.hours == tiny_year.series.hours
    settings = RobustSettings(envelope_days=2, mall_margin=0.0, pv_margin=0.0)
    warm = RobustMPCController(tiny_year.series, TARIFF, settings, before)
    cold = RobustMPCController(tiny_year.series, TARIFF, settings)
    tiny_year.reset()
    state = tiny_year.state()
    _, mall = warm._planned_pv_and_mall(state, 0, 24)
    # hour k of day 0: the higher mall load of that hour on the year before's last two days (the year's own unread)
    last_two_days = before.mall_kw[-48:].reshape(2, 24)
    np.testing.assert_allclose(mall[1:], last_two_days.max(axis=0)[1:])
    np.testing.assert_allclose(cold._planned_pv_and_mall(state, 0, 24)[1][1:], tiny_year.series.mall_kw[0])
    # yesterday's EVs at hour 0: those that arrived on the year before's last day, planned 24 h after they came
    arrivals = before.sessions["arrival_step"].to_numpy() - before.hours
    expected = sorted((arrivals[arrivals >= -24] + 24).tolist())
    assert expected, "the tiny year before has EVs on its last day"
    assert sorted(warm._coming_sessions(0, 24)[1].tolist()) == [start for start in expected if start < 24]
    assert len(cold._coming_sessions(0, 24)[1]) == 0
    # a day in, the year's own days are the past again
    t = 24 * 3
    np.testing.assert_array_equal(warm._coming_sessions(t, 24)[1], cold._coming_sessions(t, 24)[1])
    np.testing.assert_array_equal(
        warm._planned_pv_and_mall(state, t, 24)[1], cold._planned_pv_and_mall(state, t, 24)[1]
    )


@pytest.mark.parametrize("horizon", [24, 36])
def test_the_robust_mpc_serves_every_ev_between_the_optimum_and_the_rule(tiny_year, horizon):
    before = year_before(tiny_year.site_config) if horizon == 36 else None
    makers = reference_controllers(tiny_year, RobustSettings(horizon=horizon), before)
    bills = {name: run_year(tiny_year, makers[name](), 7) for name in (RULE, OPTIMUM, f"mpc_robust_{TARIFF}")}
    robust = bills[f"mpc_robust_{TARIFF}"]
    assert bills[OPTIMUM].tariff_cost <= robust.tariff_cost < bills[RULE].tariff_cost
    assert robust.ev_unmet_kwh <= bills[OPTIMUM].ev_unmet_kwh + 1e-6
    # the monthly split adds up to the year's bill
    assert robust.months["bill"].sum() == pytest.approx(robust.bill["tariff_cost"], rel=1e-9)
    assert robust.months["demand_charge"].sum() == pytest.approx(robust.bill["demand_charge"], rel=1e-9)


def test_the_monthly_bill_adds_up_to_the_years_bill_on_a_two_month_series():
    import pandas as pd

    from iquitos_lightning.site.config import load_site_config

    config = load_site_config(TINY)
    hours = 24 * 7
    rng = np.random.default_rng(0)
    flows = pd.DataFrame(
        {
            "grid_import_kw": rng.uniform(0, 50, hours),
            "price_per_kwh": rng.uniform(0.2, 0.5, hours),
            "carbon_intensity_kg_per_kwh": np.full(hours, 0.45),
        }
    )
    months = monthly_bill(flows, config)
    year = tariff_bill(flows, config)
    assert months["bill"].sum() == pytest.approx(year["tariff_cost"], rel=1e-12)
    assert months["max_import_kw"].max() == pytest.approx(flows["grid_import_kw"].max())
