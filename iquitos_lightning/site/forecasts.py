"""What the site knows of its coming hours: the forecasts every controller and agent plans with.

Why one module: an agent's observation, the controllers it acts around (control/peak_shaver.py) and the
references it is compared with (control/tariff_rule.py, control/mpc.py) must plan with the same
information, or a table compares an oracle with a site. Two kinds (``env.forecasts``):

- ``past_days`` (the default, what a site really has): the PV output and mall load of hour ``t + k``
  (k = 1..24) are the mean of the same hour of the day on the previous :data:`FORECAST_DAYS` days,
  read at hour ``t`` (so only values of hours ``<= t`` enter); the persistence-of-the-daily-profile
  forecast that MPC studies take as their baseline. Before any such hour exists (the year's first
  hours) the forecast is the value now.
- ``oracle``: the true values of the coming hours, as CityLearn's "predictions" are (what the seeds'
  agents saw): an upper bound, kept for the value-of-information rows.

Prices and the calendar are a published schedule: known ahead under both.
"""

from __future__ import annotations

import numpy as np

PAST_DAYS, ORACLE = "past_days", "oracle"
FORECASTS = (PAST_DAYS, ORACLE)
FORECAST_DAYS = 3
HOURS_PER_DAY = 24


def check_forecasts(forecasts: str) -> str:
    """``forecasts`` if it is one of :data:`FORECASTS`, else a ValueError naming them."""
    if forecasts not in FORECASTS:
        raise ValueError(f"env.forecasts must be one of {FORECASTS}, got {forecasts!r}")
    return forecasts


def forecast_table(values: np.ndarray, ahead: np.ndarray | list[int], forecasts: str = PAST_DAYS) -> np.ndarray:
    """[T, K]: the forecast at hour ``t`` of ``values[t + k]`` for each ``k`` of ``ahead`` (1 <= k <= 24).

    ``oracle``: the true value (the year's last value past its end, as the observation always padded);
    ``past_days``: the mean of ``values[t + k - 24 d]`` over d = 1..FORECAST_DAYS where that hour is in the
    year (it is never after ``t``), else ``values[t]``.
    """
    check_forecasts(forecasts)
    values = np.asarray(values, dtype=float)
    hours = len(values)
    ahead = np.asarray(ahead, dtype=int)
    if ahead.size and (ahead.min() < 1 or ahead.max() > HOURS_PER_DAY):
        raise ValueError(f"forecast horizons must lie in 1..{HOURS_PER_DAY}, got {ahead.tolist()}")
    steps = np.arange(hours)[:, None] + ahead[None, :]
    if forecasts == ORACLE:
        return values[np.minimum(steps, hours - 1)]
    total = np.zeros(steps.shape)
    count = np.zeros(steps.shape)
    for day in range(1, FORECAST_DAYS + 1):
        past = steps - HOURS_PER_DAY * day
        known = past >= 0
        total += np.where(known, values[np.clip(past, 0, None)], 0.0)
        count += known
    now = np.broadcast_to(values[:, None], steps.shape)
    return np.where(count > 0, total / np.maximum(count, 1), now)
