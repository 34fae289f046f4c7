"""The tables a twin's step reads: each year's per-step arrays, stacked year after year as tensors on the twin's device.

Why a module of its own: a twin batches several years of one site (env b simulates year ``b % Y``) and every step
indexes one set of tables with each env's row (year offset + clock). Turning the years' site tables and series into
those tensors, and refusing a year that is not of the same site, happens once, when the twin is built; the step
(envs/twin_step.py) only reads the result, and the device moves (envs/twin_device.py) see it as one more holder of
tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from iquitos_lightning.envs.site_tables import SiteTables, observation_table
from iquitos_lightning.site.series import SiteSeries

F64 = torch.float64


@dataclass(eq=False)
class StackedTables:
    """The per-step tensors [Y x T, ...] (the years' tables one after the other) every step indexes with the envs'
    rows, and the site's per-socket constants. A plain holder: ``IquitosTwin.to`` moves each tensor attribute."""

    observation: torch.Tensor  # float32 [Y x T, W]: every step's observation with the state columns (and SOCs) 0
    bess_index: int  # the observation's first state column (the BESS SOC)
    state_end: int  # past its last state column (the socket features of ``full`` follow)
    connected: torch.Tensor
    required_soc: torch.Tensor
    hours_left: torch.Tensor
    charger_kw: torch.Tensor  # [S]
    in_peak_window: torch.Tensor
    window_rest_kw: torch.Tensor
    window_rest_open: torch.Tensor
    demand_period_start: torch.Tensor
    departing: torch.Tensor
    arriving: torch.Tensor
    # CityLearn reads the arrival SOC from the charger CSV as float32 and forces it into a float32 array.
    arrival_soc: torch.Tensor
    session_arrival_soc: np.ndarray  # [T, S] float64 of the first year: the energy delivered (record, one year)
    session_arrival_soc_f32: torch.Tensor  # a mid-session start's EV SOC
    battery_kwh: torch.Tensor  # [S]
    hourly: torch.Tensor  # [Y x T, 4] float64: PV, mall, price, carbon
    hourly_f32: torch.Tensor  # [Y x T, 2] float32: mall and the building's PV term (-PV)


def stacked_tables(
    series: SiteSeries, years: Sequence[SiteSeries], year_tables: Sequence[SiteTables], device: torch.device
) -> StackedTables:
    """The years' tables (``year_tables[i]`` built from ``years[i]``) as one :class:`StackedTables` on ``device``,
    with the per-socket constants of ``series`` (the years share them: :func:`same_site_years`)."""

    def tensor(parts: list[Any], dtype: torch.dtype = F64) -> torch.Tensor:
        return torch.tensor(np.concatenate([np.asarray(part) for part in parts]), dtype=dtype, device=device)

    arrays = [year_arrays(series, tables) for series, tables in zip(years, year_tables, strict=True)]

    def stacked(name: str, dtype: torch.dtype = F64) -> torch.Tensor:
        return tensor([year[name] for year in arrays], dtype)

    first = year_tables[0]
    return StackedTables(
        observation=tensor([observation_table(tables) for tables in year_tables], torch.float32),
        bess_index=first.bess_soc_index,
        state_end=first.bess_soc_index + first.state_width,
        connected=stacked("connected", torch.bool),
        required_soc=stacked("required_soc"),
        hours_left=stacked("hours_left"),
        charger_kw=torch.tensor(series.socket_charger_kw, dtype=F64, device=device),
        in_peak_window=stacked("in_peak_window"),
        window_rest_kw=stacked("window_rest_kw"),
        window_rest_open=stacked("window_rest_open", torch.bool),
        demand_period_start=stacked("demand_period_start", torch.bool),
        departing=stacked("departing", torch.bool),
        arriving=stacked("arriving", torch.bool),
        arrival_soc=stacked("arrival_soc", torch.float32),
        session_arrival_soc=arrays[0]["session_arrival_soc"],
        session_arrival_soc_f32=stacked("session_arrival_soc", torch.float32),
        battery_kwh=torch.tensor(series.socket_battery_kwh, dtype=F64, device=device),
        hourly=stacked("hourly"),
        hourly_f32=stacked("hourly_f32", torch.float32),
    )


def reference_rows(values: np.ndarray | None, rows: int, name: str, device: torch.device) -> torch.Tensor | None:
    """A reference table (envs/reference_tables.py) as a tensor over the stacked years' ``rows``, refused unless it
    has one value per row."""
    if values is None:
        return None
    if np.shape(values) != (rows,):
        raise ValueError(f"references.{name} must have {rows} values (years x hours), got {np.shape(values)}")
    return torch.tensor(values, dtype=F64, device=device)


def same_site_years(series: SiteSeries, years: Sequence[SiteSeries]) -> list[SiteSeries]:
    """``years`` (or ``[series]``), refused unless each is a year of ``series``' site: the same hours, sockets and
    physics; the stacked tables and the one set of models need that."""
    years = list(years) or [series]
    for year in years:
        config = year.config
        same = (
            year.hours == series.hours
            and np.array_equal(year.socket_charger_kw, series.socket_charger_kw)
            and np.array_equal(year.socket_battery_kwh, series.socket_battery_kwh)
            and config.bess == series.config.bess
            and config.grid == series.config.grid
            and config.calendar == series.config.calendar
        )
        if not same:
            raise ValueError(
                f"training year {config.name!r} is not a year of site {series.config.name!r}: a twin batches years "
                "of one site profile (same calendar, sockets, BESS and grid; other seeds)"
            )
    return years


def year_arrays(series: SiteSeries, tables: SiteTables) -> dict[str, np.ndarray]:
    """The per-step arrays [T, ...] of one year the twin's step reads (numpy; stacked by :func:`stacked_tables`)."""
    hours, sockets = series.hours, series.config.ev.socket_count
    sessions = series.sessions
    steps, socket = sessions["arrival_step"].to_numpy(int), sessions["socket"].to_numpy(int)
    inside = steps < hours
    arrival_soc = np.zeros((hours, sockets))
    arrival_soc[steps[inside], socket[inside]] = sessions["arrival_soc"].to_numpy(float)[inside]
    arriving = np.zeros((hours, sockets), dtype=bool)
    arriving[steps[inside], socket[inside]] = True
    # The session's own arrival SOC (float64), from which the env measures the energy delivered.
    session_arrival = np.zeros((hours, sockets))
    plugged = tables.session_of >= 0
    session_arrival[plugged] = sessions["arrival_soc"].to_numpy(float)[tables.session_of[plugged]]
    return {
        "connected": tables.connected,
        "required_soc": tables.required_soc,
        "hours_left": tables.hours_to_departure,
        "in_peak_window": tables.in_peak_window,
        "window_rest_kw": tables.window_rest_kw,
        "window_rest_open": tables.window_rest_open,
        "demand_period_start": tables.demand_period_start,
        # Sessions leaving at the start of t + 1 are those plugged at t with one hour to go.
        "departing": tables.connected & (tables.hours_to_departure == 1),
        "arriving": arriving,
        "arrival_soc": arrival_soc,
        "session_arrival_soc": session_arrival,
        "hourly": np.column_stack(
            [series.pv_kw, series.mall_kw, series.price_per_kwh, series.carbon_intensity_kg_per_kwh]
        ),
        "hourly_f32": np.column_stack([series.mall_kw, -series.pv_kw]),
    }
