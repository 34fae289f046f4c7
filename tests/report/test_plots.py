"""Dispatch and monthly plots render to PNG from flow tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import image

from iquitos_lightning.metrics.flows import FLOW_COLUMNS
from iquitos_lightning.report.plots import plot_dispatch_week, plot_monthly_energy, typical_week_start


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
    flows = {"uncontrolled": _flows(60), "optimum": _flows(60)}
    week = plot_dispatch_week(flows, tmp_path / "week.png", year=2025, title="test")
    monthly = plot_monthly_energy(flows, tmp_path / "monthly.png", year=2025, title="test")

    for path in (week, monthly):
        pixels = image.imread(path)
        assert pixels.shape[0] > 600 and pixels.shape[1] > 1000
        assert pixels[..., :3].std() > 0.05  # not a blank canvas
