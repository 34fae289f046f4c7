"""PV, mall load and EV sessions: the generated data keeps the physical and calendar rules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from iquitos_lightning.site.config import load_site_config
from iquitos_lightning.site.demand import dwell_probabilities, ev_sessions, first_free_sockets, mall_load
from iquitos_lightning.site.pv import simulate_pv

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"


def test_mall_load_keeps_each_month_energy_and_the_daily_shape() -> None:
    config = load_site_config(TINY)
    times = pd.date_range("2025-01-01", periods=365 * 24, freq="h")
    load = mall_load(config, times.month.to_numpy() - 1, times.hour.to_numpy())
    assert (
        load.sum() == np.float64(config.mall.annual_kwh).round(0) or abs(load.sum() / config.mall.annual_kwh - 1) < 1e-9
    )
    monthly = pd.Series(load, index=times).resample("MS").sum().to_numpy()
    shares = np.asarray(config.mall.monthly_mwh) / sum(config.mall.monthly_mwh)
    np.testing.assert_allclose(monthly / monthly.sum(), shares, rtol=1e-9)
    by_hour = pd.Series(load).groupby(times.hour).mean()
    assert by_hour[14] > 4 * by_hour[3]


def test_sessions_stay_within_opening_hours_and_never_share_a_socket() -> None:
    config = load_site_config(TINY)
    sessions = ev_sessions(config).sessions
    arrival_hour = sessions["arrival_step"] % 24
    dwell = sessions["departure_step"] - sessions["arrival_step"]
    assert (arrival_hour >= config.ev.open_hour).all()
    assert ((sessions["departure_step"] - 1) % 24 < config.ev.close_hour).all()
    assert (sessions["departure_step"] // 24 == sessions["arrival_step"] // 24).all() or config.ev.close_hour == 24
    assert dwell.between(config.ev.dwell_min_h, config.ev.dwell_max_h).all()
    assert (sessions["required_soc"] >= sessions["arrival_soc"]).all() and (sessions["required_soc"] <= 1).all()
    for _, own in sessions.groupby("socket"):
        own = own.sort_values("arrival_step")
        assert (own["arrival_step"].to_numpy()[1:] >= own["departure_step"].to_numpy()[:-1]).all()


def test_dwell_distribution_has_the_configured_mean() -> None:
    config = load_site_config(TINY)
    hours, probabilities = dwell_probabilities(config)
    assert float(hours @ probabilities) == __import__("pytest").approx(config.ev.dwell_mean_h, abs=1e-6)


def test_short_calendar_is_the_start_of_the_full_year() -> None:
    config = load_site_config(TINY)
    short = simulate_pv(config)
    assert len(short.pv_kw) == config.hours
    assert short.calibration["annual_ghi_kwh_m2"] > 1000  # the calibration is the full year's
    assert short.pv_kw.max() > 0.5 * config.pv.dc_kwp * 0.8


def _scan_every_socket(sockets_per_fleet, fleet_of, arrival_step, departure_step, tie_break) -> list[int]:
    """The socket choice as a scan of every socket of the fleet per arrival (what demand.py did before its heap)."""
    first = np.concatenate([[0], np.cumsum(sockets_per_fleet)[:-1]])
    free_at = [np.zeros(count, dtype=np.int64) for count in sockets_per_fleet]
    chosen_sockets = []
    for fleet, arrival, departure, tie in zip(fleet_of, arrival_step, departure_step, tie_break, strict=True):
        free = np.flatnonzero(free_at[fleet] <= arrival)
        if len(free) == 0:
            chosen_sockets.append(-1)
            continue
        chosen = free[int(tie * len(free))]
        free_at[fleet][chosen] = departure
        chosen_sockets.append(int(first[fleet] + chosen))
    return chosen_sockets


def test_the_sockets_arrivals_take_are_the_scan_of_every_sockets_choice() -> None:
    """Busy hours where every socket of a fleet is taken (arrivals turned away), zero-hour sessions and ties: the
    heap of taken sockets chooses what a scan of every socket chooses."""
    rng = np.random.default_rng(5)
    config = load_site_config(TINY)
    arrivals = 3000
    fleet_of = rng.integers(0, len(config.ev.fleets), arrivals)
    arrival_step = np.sort(rng.integers(0, 400, arrivals))
    departure_step = arrival_step + rng.integers(0, 12, arrivals)
    tie_break = rng.random(arrivals)
    sockets_per_fleet = [fleet.sockets for fleet in config.ev.fleets]
    chosen = first_free_sockets(config.ev, fleet_of, arrival_step, departure_step, tie_break)
    assert chosen == _scan_every_socket(sockets_per_fleet, fleet_of, arrival_step, departure_step, tie_break)
    assert chosen.count(-1) > 100 and len(set(chosen)) == sum(sockets_per_fleet) + 1  # full hours, every socket
