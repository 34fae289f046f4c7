"""Dispatch, average-day and monthly plots render to PNG from flow tables; the average day is the hourly mean."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib import image

from iquitos_lightning.metrics.flows import FLOW_COLUMNS
from iquitos_lightning.report.plots import (
    daily_profile,
    plot_daily_profile,
    plot_dispatch_week,
    plot_monthly_energy,
    typical_week_start,
)


def _flows(days: int, pv_scale_by_day: np.ndarray | None = None) -> pd.DataFrame:
    hours = np.arange(days * 24)
    hour_of_day = hours % 24
    pv = np.clip(np.sin((hour_of_day - 6) / 12 * np.pi), 0, None) * 100
    if pv_scale_by_day is not None:
        pv = pv * pv_scale_by_day[hours // 24]
    mall = 50 + 30 * (hour_of_day >= 9)
    ev = np.where((hour_of_day >= 9) & (hour_of_day < 22), 5.0, 0.0)
    table = pd.DataFrame(
        {
            "pv_kw": pv,
            "mall_kw": mall,
            "ev_kw": ev,
            "bess_charge_kw": 0.0,
            "bess_discharge_kw": 0.0,
            "grid_import_kw": np.clip(mall + ev - pv, 0, None),
            "grid_export_kw": np.clip(pv - mall - ev, 0, None),
            "bess_soc": 0.5,
            "price_per_kwh": 0.28,
            "carbon_intensity_kg_per_kwh": 0.4521,
        }
    )
    return table[list(FLOW_COLUMNS)]


def test_typical_week_is_the_one_with_median_pv() -> None:
    """Days 0-20 bright (2x), 21-27 normal, 28-48 dim (0.5x): the median 7-day window starts mid-way."""
    scale = np.concatenate([np.full(21, 2.0), np.full(7, 1.0), np.full(21, 0.5)])
    start = typical_week_start(_flows(49, scale))

    assert start % 24 == 0
    window = scale[start // 24 : start // 24 + 7]
    assert abs(window.sum() - np.median([scale[d : d + 7].sum() for d in range(43)])) < 1e-9
    assert typical_week_start(_flows(7)) == 0


def test_plots_write_readable_pngs(tmp_path: Path) -> None:
    title_position = matplotlib.rcParams["axes.titley"]
    flows = {"uncontrolled": _flows(60), "optimum": _flows(60)}
    week = plot_dispatch_week(flows, tmp_path / "week.png", year=2025, title="test")
    monthly = plot_monthly_energy(flows, tmp_path / "monthly.png", year=2025, title="test")
    day = plot_daily_profile(flows, tmp_path / "day.png", title="test")

    for path in (week, monthly, day):
        pixels = image.imread(path)
        assert pixels.shape[0] > 600 and pixels.shape[1] > 1000
        assert pixels[..., :3].std() > 0.05  # not a blank canvas
    assert matplotlib.rcParams["axes.titley"] == title_position  # the plots' title setting stays theirs


def test_the_average_day_is_each_hours_mean_over_the_days() -> None:
    """A battery that charges 20 kW at 11-13 h every day, discharges 10 kW at 18-22 h on odd days and 30 kW on even
    days: its average day is 20 kW at 18-22 h (quartiles 10 and 30 over the days), -20 kW at noon, 0 otherwise."""
    flows = _flows(4)
    hour, day = np.arange(len(flows)) % 24, np.arange(len(flows)) // 24
    flows["bess_charge_kw"] = np.where((hour >= 11) & (hour <= 13), 20.0, 0.0)
    flows["bess_discharge_kw"] = np.where((hour >= 18) & (hour <= 22), np.where(day % 2, 10.0, 30.0), 0.0)
    flows["bess_soc"] = hour / 24

    profile = daily_profile(flows)

    assert list(profile.index) == list(range(24))
    np.testing.assert_allclose(profile["bess_net_kw"].loc[18:22], 20.0)
    np.testing.assert_allclose(profile["bess_net_kw"].loc[11:13], -20.0)
    assert (profile["bess_net_kw"].drop(index=[11, 12, 13, 18, 19, 20, 21, 22]) == 0).all()
    assert profile.loc[20, "bess_net_q25_kw"] == 10.0 and profile.loc[20, "bess_net_q75_kw"] == 30.0
    np.testing.assert_allclose(profile["bess_soc"], np.arange(24) / 24)
    np.testing.assert_allclose(profile["pv_kw"], flows["pv_kw"].iloc[:24])  # the same every day
