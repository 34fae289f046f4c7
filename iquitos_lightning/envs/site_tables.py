"""The static tables both site simulators read: per-step session facts and the observation layout.

Why a module of its own: the CityLearn env and its batched twin must show an agent exactly the
same observation (same features, order and normalisation constants). Both build their tables
here from the site series and both turn a physical state into an observation vector with
:func:`observation_vector`, so the two can never drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from iquitos_lightning.envs.reward import RewardScales
from iquitos_lightning.site.config import HOURS_PER_DAY
from iquitos_lightning.site.series import SiteSeries

FORECAST_STEPS = (1, 2, 3)
FORECAST_SERIES = ("pv", "mall", "price")  # observed now and FORECAST_STEPS ahead, in this order
CALENDAR_FEATURES = ("hour_sin", "hour_cos", "day_type_sin", "day_type_cos", "month_sin", "month_cos")
SOCKET_FEATURES = ("connected", "soc", "required_soc", "hours_to_departure")


@dataclass
class SiteTables:
    """Per-step facts of one built site (T steps, S sockets) and its observation layout."""

    session_of: np.ndarray  # [T, S] int: index of the session on the socket at step t, -1 if empty
    connected: np.ndarray  # [T, S] bool
    hours_to_departure: np.ndarray  # [T, S] int: departure_step - t while plugged, else 0
    required_soc: np.ndarray  # [T, S]: the plugged session's required SOC, else 0
    departing: list[list[int]]  # per step t: the sessions that leave at the start of t + 1
    exogenous: np.ndarray  # [T, E] float32: calendar, PV/mall/price now and forecast, carbon
    hour_of_step: np.ndarray  # [T] hour of day
    observation_names: list[str]
    dwell_scale: float  # hours_to_departure is divided by this (the longest dwell)

    @property
    def bess_soc_index(self) -> int:
        """Position of the BESS SOC in the observation vector."""
        return self.exogenous.shape[1]

    @property
    def socket_soc_indices(self) -> np.ndarray:
        """Positions of each socket's SOC in the observation vector."""
        sockets = self.connected.shape[1]
        return self.bess_soc_index + 1 + len(SOCKET_FEATURES) * np.arange(sockets) + SOCKET_FEATURES.index("soc")


def observation_names(sockets: int) -> list[str]:
    """The observation layout of a site with ``sockets`` sockets: calendar, PV/mall/price now and forecast,
    carbon intensity, BESS SOC, then per socket its features (a function of the socket count alone)."""
    names = list(CALENDAR_FEATURES)
    for name in FORECAST_SERIES:
        names += [name if ahead == 0 else f"{name}_forecast_{ahead}" for ahead in (0, *FORECAST_STEPS)]
    names += ["carbon_intensity", "bess_soc"]
    return names + [f"{feature}_{socket}" for socket in range(sockets) for feature in SOCKET_FEATURES]


def build_site_tables(series: SiteSeries, reward_scales: RewardScales) -> SiteTables:
    """Session facts per step and the exogenous part of the observations, normalised by fixed site scales."""
    hours, sockets = series.hours, series.config.ev.socket_count
    sessions = series.sessions
    session_of = np.full((hours, sockets), -1, dtype=np.int64)
    hours_to_departure = np.zeros((hours, sockets), dtype=np.int64)
    required_soc = np.zeros((hours, sockets))
    for index, (socket, arrival, departure, _, required) in enumerate(sessions.itertuples(index=False)):
        steps = np.arange(int(arrival), min(int(departure), hours))
        session_of[steps, socket] = index
        hours_to_departure[steps, socket] = int(departure) - steps
        required_soc[steps, socket] = required
    departing: list[list[int]] = [[] for _ in range(hours)]
    for index, departure in enumerate(sessions["departure_step"].to_numpy(int)):
        if 1 <= departure <= hours:
            departing[departure - 1].append(index)

    config = series.config
    times = pd.date_range(f"{config.calendar.year}-01-01", periods=hours, freq="h")
    hour = times.hour.to_numpy()
    day = times.dayofweek.to_numpy()
    month = times.month.to_numpy() - 1
    exogenous = [
        np.sin(2 * np.pi * hour / HOURS_PER_DAY),
        np.cos(2 * np.pi * hour / HOURS_PER_DAY),
        np.sin(2 * np.pi * day / 7),
        np.cos(2 * np.pi * day / 7),
        np.sin(2 * np.pi * month / 12),
        np.cos(2 * np.pi * month / 12),
    ]
    for values, scale in (
        (series.pv_kw, config.pv.ac_limit_kw),
        (series.mall_kw, max(float(series.mall_kw.max()), 1e-9)),
        (series.price_per_kwh, reward_scales.max_price),
    ):
        for ahead in (0, *FORECAST_STEPS):
            shifted = np.concatenate([values[ahead:], np.repeat(values[-1:], ahead)])
            exogenous.append(shifted / scale)
    exogenous.append(series.carbon_intensity_kg_per_kwh / reward_scales.max_carbon)
    return SiteTables(
        session_of=session_of,
        connected=session_of >= 0,
        hours_to_departure=hours_to_departure,
        required_soc=required_soc,
        departing=departing,
        exogenous=np.column_stack(exogenous).astype(np.float32),
        hour_of_step=hour,
        observation_names=observation_names(sockets),
        dwell_scale=float(config.ev.dwell_max_h),
    )


def observation_vector(tables: SiteTables, t: int | np.ndarray, bess_soc: object, socket_soc: np.ndarray) -> np.ndarray:
    """The float32 observation at step(s) ``t``: exogenous, BESS SOC, then per socket its four features.

    ``t`` is one step (``bess_soc`` a float, ``socket_soc`` [S]) or an array of steps ([N], [N], [N, S]).
    """
    sockets = np.stack(
        [
            tables.connected[t].astype(float),
            np.asarray(socket_soc, dtype=float),
            tables.required_soc[t],
            tables.hours_to_departure[t] / tables.dwell_scale,
        ],
        axis=-1,
    )
    sockets = sockets.reshape(*sockets.shape[:-2], -1)
    bess = np.asarray(bess_soc, dtype=float)[..., None]
    return np.concatenate([tables.exogenous[t], bess, sockets], axis=-1).astype(np.float32)
