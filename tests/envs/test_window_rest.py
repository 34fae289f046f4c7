"""The site tables' forecasts of the rest of the peak window (envs/site_tables.py ``window_rest``): the later hours
of the same window, as the ``past_days`` forecast or the true series."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from iquitos_lightning.envs.site_tables import window_rest
from iquitos_lightning.envs.twin import make_twin

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"


def test_the_window_forecasts_are_the_later_hours_of_the_same_window(tmp_path: Path) -> None:
    twin = make_twin(TINY, data_root=tmp_path)
    series, grid = twin.series, twin.site_config.grid
    rest, open_ = window_rest(series)  # past_days: the same hours of the days before (one, on the second day)
    width = grid.peak_end_hour - grid.peak_start_hour
    assert rest.shape == open_.shape == (series.hours, width - 1)
    net = series.mall_kw - series.pv_kw
    first = 24 + grid.peak_start_hour  # the second day's window opens
    np.testing.assert_array_equal(open_[first], True)
    np.testing.assert_allclose(rest[first], net[first + 1 - 24 : first + width - 24], rtol=1e-12)
    oracle, _ = window_rest(series, "oracle")  # the later hours themselves
    np.testing.assert_array_equal(oracle[first], net[first + 1 : first + width])
    last = first + width - 1  # its last hour: nothing later in the window
    assert not open_[last].any() and not rest[last].any()
    assert open_[last - 1].tolist() == [True] + [False] * (width - 2)
    assert not open_[first - 1].any()  # the hour before the window
    assert not open_[series.hours - 1].any()
