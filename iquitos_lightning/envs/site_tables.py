"""The static tables both site simulators read: per-step session facts and the observation layout.

Why a module of its own: the CityLearn env and its batched twin must show an agent exactly the
same observation (same features, order and normalisation constants). Both build their tables
here from the site series and both compute the state-dependent columns with :func:`state_columns`
(the CityLearn env through :func:`observation_vector`), so the two can never drift apart.

Two layouts (``env.observation``, :data:`OBSERVATION_MODES`):
- ``full``: the exogenous columns, the BESS SOC (and the month-to-date peak), then four columns per socket;
- ``compact``: the same exogenous columns less the constant ones, the net load now, the BESS SOC (and the
  peak, on the BESS power's scale), then a few fleet sums of the sockets (envs/fleet_features.py). What the
  fleet-level layouts see by default (``auto``): their EV action is one number for the whole fleet.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from iquitos_lightning.envs.actions import PER_SOCKET, SocketBands
from iquitos_lightning.envs.arrays import Array, is_torch
from iquitos_lightning.envs.fleet_features import FLEET_FEATURES, fleet_features
from iquitos_lightning.envs.objectives import (
    MONTH,
    TARIFF,
    THESIS,
    check_objective,
    demand_period_starts,
    month_start_steps,
    peak_window_steps,
)
from iquitos_lightning.envs.reward import RewardScales
from iquitos_lightning.site.config import HOURS_PER_DAY
from iquitos_lightning.site.forecasts import ORACLE, PAST_DAYS, check_forecasts, forecast_table
from iquitos_lightning.site.series import SiteSeries, plugged_steps

FORECAST_STEPS = (1, 2, 3)
# The ``tariff`` objective plans against a monthly peak and a day of prices: it also sees PV and mall
# load up to a day ahead, how far the month has gone, and the month-to-date peak import (dynamic).
DAY_AHEAD_STEPS = tuple(range(4, 25))
CALENDAR_FEATURES = ("hour_sin", "hour_cos", "day_type_sin", "day_type_cos", "month_sin", "month_cos")
SOCKET_FEATURES = ("connected", "soc", "required_soc", "hours_to_departure")

FULL, COMPACT, AUTO = "full", "compact", "auto"
# ``auto``: ``compact`` for every action layout but ``per_socket``, whose actions are per socket (so are its inputs).
OBSERVATION_MODES = (AUTO, FULL, COMPACT)


def resolve_observation(observation: str, layout: str) -> str:
    """The layout (``full`` or ``compact``) an ``env.observation`` setting gives under the action ``layout``."""
    if observation not in OBSERVATION_MODES:
        raise ValueError(f"env.observation must be one of {OBSERVATION_MODES}, got {observation!r}")
    if observation == AUTO:
        return FULL if layout == PER_SOCKET else COMPACT
    return observation


@dataclass
class SiteTables:
    """Per-step facts of one built site (T steps, S sockets) and its observation layout."""

    session_of: np.ndarray  # [T, S] int: index of the session on the socket at step t, -1 if empty
    connected: np.ndarray  # [T, S] bool
    hours_to_departure: np.ndarray  # [T, S] int: departure_step - t while plugged, else 0
    required_soc: np.ndarray  # [T, S]: the plugged session's required SOC, else 0
    departing: list[list[int]]  # per step t: the sessions that leave at the start of t + 1
    exogenous: np.ndarray  # [T, E] float32: calendar, PV/mall/price now and forecast, carbon (full) or net load
    hour_of_step: np.ndarray  # [T] hour of day
    observation_names: list[str]
    dwell_scale: float  # hours_to_departure is divided by this (the longest dwell)
    objective: str = THESIS
    # the month-to-date peak (tariff only) is divided by this: the largest import (full), the BESS power (compact)
    peak_scale: float = 1.0
    observation: str = FULL  # the layout: FULL or COMPACT
    fleet_kw: float = 1.0  # compact: the sockets' total charger power, the fleet sums' scale (kW, kWh per hour)
    # [T] bool: steps where the billed peak-to-date restarts (a month opens; each midnight with demand_period day)
    demand_period_start: np.ndarray | None = None
    in_peak_window: np.ndarray | None = None  # [T] float: 1.0 inside the peak window (demand charge, rule prior)
    # [T, W-1] the mall load minus PV of the later hours of step t's peak window (W its length; 0 where there is
    # none: outside the window, past its end or the year's) and [T, W-1] bool which are such hours (the shaver)
    window_rest_kw: np.ndarray | None = None
    window_rest_open: np.ndarray | None = None

    @property
    def bess_soc_index(self) -> int:
        """Position of the BESS SOC in the observation vector."""
        return self.exogenous.shape[1]

    @property
    def peak_index(self) -> int | None:
        """Position of the month-to-date peak import (``tariff`` only), right after the BESS SOC."""
        return self.bess_soc_index + 1 if self.objective == TARIFF else None

    @property
    def state_width(self) -> int:
        """How many columns follow the exogenous ones and depend on the state: BESS SOC, (the peak to date),
        (compact: the fleet sums)."""
        return 1 + (self.objective == TARIFF) + (len(FLEET_FEATURES) if self.observation == COMPACT else 0)

    @property
    def socket_offset(self) -> int:
        """Position of the first socket feature (``full`` only): after the BESS SOC (and the peak to date)."""
        if self.observation != FULL:
            raise ValueError(f"the {self.observation!r} observation has no per-socket features")
        return self.bess_soc_index + self.state_width

    @property
    def socket_soc_indices(self) -> np.ndarray:
        """Positions of each socket's SOC in the observation vector (``full`` only)."""
        sockets = self.connected.shape[1]
        return self.socket_offset + len(SOCKET_FEATURES) * np.arange(sockets) + SOCKET_FEATURES.index("soc")


def observation_names(sockets: int, objective: str = THESIS, observation: str = FULL) -> list[str]:
    """The observation layout of a site with ``sockets`` sockets under ``objective``: calendar, PV/mall/price now
    and forecast, (``full``: carbon intensity), (``tariff``: month progress and PV/mall a day ahead),
    (``compact``: the net load now), BESS SOC, (``tariff``: the month-to-date peak import), then per socket its
    features (``full``) or the fleet sums (``compact``). A function of the socket count, the objective and the
    layout alone, so a run is sized without building its site (envs.factory.env_specs).

    ``compact`` leaves out the carbon intensity: the site config has one value for the year (grid), so the column
    is constant and tells an agent nothing."""
    check_objective(objective)
    if observation not in (FULL, COMPACT):
        raise ValueError(f"observation layout must be {FULL!r} or {COMPACT!r}, got {observation!r}")
    names = list(CALENDAR_FEATURES)
    for name in ("pv", "mall", "price"):
        names += [name if ahead == 0 else f"{name}_forecast_{ahead}" for ahead in (0, *FORECAST_STEPS)]
    if observation == FULL:
        names.append("carbon_intensity")
    if objective == TARIFF:
        names.append("month_progress")
        names += [f"{name}_forecast_{ahead}" for name in ("pv", "mall") for ahead in DAY_AHEAD_STEPS]
    if observation == COMPACT:
        names.append("net_load")
    names.append("bess_soc")
    if objective == TARIFF:
        names.append("month_peak_import")
    if observation == COMPACT:
        return names + list(FLEET_FEATURES)
    return names + [f"{feature}_{socket}" for socket in range(sockets) for feature in SOCKET_FEATURES]


def forecast_scales(series: SiteSeries, reward_scales: RewardScales) -> dict[str, float]:
    """What the observation divides PV and mall load by, now and at every hour ahead: the inverter's AC limit and
    the site's largest mall load (envs/hindsight.py scales the critic's true coming hours by the same)."""
    return {"pv": series.config.pv.ac_limit_kw, "mall": max(reward_scales.mall_max_kw, 1e-9)}


def build_site_tables(
    series: SiteSeries,
    reward_scales: RewardScales,
    objective: str = THESIS,
    demand_period: str = MONTH,
    observation: str = FULL,
    forecasts: str = PAST_DAYS,
) -> SiteTables:
    """Session facts per step and the exogenous part of the observations, normalised by fixed site scales.

    ``observation`` is the layout (``full`` or ``compact``, :func:`resolve_observation` turns ``auto`` into one).
    ``forecasts`` (site/forecasts.py) is what the PV and mall columns of later hours hold, and what the shaver's
    rest-of-window forecast is made of: ``past_days`` (the previous days' same hours) or ``oracle`` (the truth).
    Every scale is a constant of ``reward_scales`` or the site config, never of this series' later hours.
    """
    check_forecasts(forecasts)
    names = observation_names(series.config.ev.socket_count, objective, observation)
    hours, sockets = series.hours, series.config.ev.socket_count
    sessions = series.sessions
    session_of = np.full((hours, sockets), -1, dtype=np.int64)
    hours_to_departure = np.zeros((hours, sockets), dtype=np.int64)
    required_soc = np.zeros((hours, sockets))
    # Every plugged-in (step, socket) of every session at once (a socket's sessions never overlap): a loop over the
    # ~230,000 sessions of a year took ~2 s of every twin's construction, per year, on the 2-core machine.
    socket = sessions["socket"].to_numpy(np.int64)
    arrival = sessions["arrival_step"].to_numpy(np.int64)
    departure = sessions["departure_step"].to_numpy(np.int64)
    index, steps = plugged_steps(arrival, departure, hours)
    session_of[steps, socket[index]] = index
    hours_to_departure[steps, socket[index]] = departure[index] - steps
    required_soc[steps, socket[index]] = sessions["required_soc"].to_numpy(float)[index]
    departing: list[list[int]] = [[] for _ in range(hours)]
    for session, departure_step in enumerate(departure.tolist()):
        if 1 <= departure_step <= hours:
            departing[departure_step - 1].append(session)

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
    scales = forecast_scales(series, reward_scales)
    for values, scale, known in (
        (series.pv_kw, scales["pv"], forecasts),
        (series.mall_kw, scales["mall"], forecasts),
        (series.price_per_kwh, reward_scales.max_price, ORACLE),  # a published schedule
    ):
        exogenous.append(values / scale)
        exogenous += list((forecast_table(values, FORECAST_STEPS, known) / scale).T)
    if observation == FULL:
        exogenous.append(series.carbon_intensity_kg_per_kwh / reward_scales.max_carbon)
    month_start = month_start_steps(config, hours)
    if objective == TARIFF:
        opened = np.maximum.accumulate(np.where(month_start, np.arange(hours), 0))
        month_hours = pd.Series(times.days_in_month.to_numpy() * HOURS_PER_DAY)
        exogenous.append((np.arange(hours) - opened) / month_hours.to_numpy())
        for values, scale in ((series.pv_kw, scales["pv"]), (series.mall_kw, scales["mall"])):
            exogenous += list((forecast_table(values, DAY_AHEAD_STEPS, forecasts) / scale).T)
    bess_kw = max(config.bess.power_kw, 1e-9)
    if observation == COMPACT:  # what the BESS would have to cover (+) or could store (-), in its own power
        exogenous.append((series.mall_kw - series.pv_kw) / bess_kw)
    rest_kw, rest_open = window_rest(series, forecasts)
    return SiteTables(
        session_of=session_of,
        connected=session_of >= 0,
        hours_to_departure=hours_to_departure,
        required_soc=required_soc,
        departing=departing,
        exogenous=np.column_stack(exogenous).astype(np.float32),
        hour_of_step=hour,
        observation_names=names,
        dwell_scale=float(config.ev.dwell_max_h),
        objective=objective,
        peak_scale=max(reward_scales.max_import_kw, 1e-9) if observation == FULL else bess_kw,
        observation=observation,
        fleet_kw=max(float(series.socket_charger_kw.sum()), 1e-9),
        demand_period_start=demand_period_starts(config, hours, demand_period),
        in_peak_window=peak_window_steps(config, hours).astype(float),
        window_rest_kw=rest_kw,
        window_rest_open=rest_open,
    )


def window_rest(series: SiteSeries, forecasts: str = PAST_DAYS) -> tuple[np.ndarray, np.ndarray]:
    """The forecast mall load minus PV of the later hours of each step's peak window ([T, W-1], 0 where there is
    none) and which entries are such hours ([T, W-1] bool): what the peak shaver water-fills with
    (control/peak_shaver.py), the same ``forecasts`` the ``tariff`` observation's day-ahead PV and mall columns
    carry (site/forecasts.py)."""
    grid, hours = series.config.grid, series.hours
    width = grid.peak_end_hour - grid.peak_start_hour
    hour = np.arange(hours) % HOURS_PER_DAY
    in_window = peak_window_steps(series.config, hours)
    ahead = np.arange(1, width)
    later = np.arange(hours)[:, None] + ahead[None, :]
    open_ = in_window[:, None] & (hour[:, None] + ahead[None, :] < grid.peak_end_hour) & (later < hours)
    net = forecast_table(series.mall_kw - series.pv_kw, ahead, forecasts)
    rest = np.where(open_, net, 0.0)
    return rest, open_


def state_columns(
    tables: SiteTables,
    bess_soc: Array,
    peak_to_date_kw: Array,
    bands: SocketBands | None = None,
    connected: Array | None = None,
    hours_left: Array | None = None,
) -> Array:
    """[..., ``tables.state_width``] float64: the columns after the exogenous ones that depend on the state.

    BESS SOC, (``tariff``: the month-to-date peak import / ``peak_scale``), (``compact``: the fleet sums of
    :func:`~iquitos_lightning.envs.fleet_features.fleet_features` from the hour's ``bands``, ``connected`` and
    ``hours_left`` [..., S]). Array-generic: the CityLearn env calls it with numpy ([...] = ()), the twin with
    torch ([B]); elementwise float64 operations and sums in index order, so both give the same bits.
    """
    fleet = None
    if tables.observation == COMPACT:
        if bands is None or connected is None or hours_left is None:
            raise ValueError("the compact observation needs the hour's socket bands, connected and hours left")
        fleet = fleet_features(bands, connected, hours_left, tables.fleet_kw, tables.dwell_scale)
    if is_torch(bess_soc):
        import torch  # lazy: the CityLearn env never loads torch here

        columns = [bess_soc.to(torch.float64)[..., None]]
        if tables.objective == TARIFF:
            columns.append(peak_to_date_kw.to(torch.float64)[..., None] / tables.peak_scale)
        return torch.cat(columns if fleet is None else [*columns, fleet], -1)
    soc = np.asarray(bess_soc, dtype=float)
    columns = [soc[..., None]]
    if tables.objective == TARIFF:
        peak = np.broadcast_to(np.asarray(peak_to_date_kw, dtype=float), soc.shape)
        columns.append(peak[..., None] / tables.peak_scale)
    return np.concatenate(columns if fleet is None else [*columns, fleet], -1)


def observation_table(tables: SiteTables) -> np.ndarray:
    """[T, O] float32: every step's observation with the state columns 0 (and, ``full``, every socket SOC 0), the
    table the twin indexes with its clocks before it writes the state in."""
    hours, sockets = tables.connected.shape
    if tables.observation == COMPACT:
        return np.concatenate([tables.exogenous, np.zeros((hours, tables.state_width), np.float32)], -1)
    zeros = np.zeros((hours, sockets))
    return observation_vector(tables, np.arange(hours), zeros[:, 0], zeros)


def observation_vector(
    tables: SiteTables,
    t: int | np.ndarray,
    bess_soc: object,
    socket_soc: np.ndarray,
    peak_to_date_kw: object = 0.0,
    bands: SocketBands | None = None,
) -> np.ndarray:
    """The float32 observation at step(s) ``t``: exogenous, the :func:`state_columns`, then (``full``) per socket
    its four features.

    ``t`` is one step (``bess_soc`` a float, ``socket_soc`` [S]) or an array of steps ([N], [N], [N, S]);
    ``bands`` (``compact`` only) the sockets' bands at ``t`` from ``actions.socket_bands`` with ``socket_soc``.
    """
    if tables.observation == COMPACT:
        state = state_columns(
            tables, bess_soc, peak_to_date_kw, bands, tables.connected[t], tables.hours_to_departure[t]
        )
        return np.concatenate([tables.exogenous[t], state], axis=-1).astype(np.float32)
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
    state = state_columns(tables, bess_soc, peak_to_date_kw)
    return np.concatenate([tables.exogenous[t], state, sockets], axis=-1).astype(np.float32)
