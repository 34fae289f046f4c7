"""Check a site's data before anything simulates it: files present and complete, no NaN, plausible units, sessions.

Why: a built folder is reused across runs and may have been edited (real measured series pasted
in), truncated by a full disk or partly deleted. Unchecked, a short CSV or a NaN surfaces as an
IndexError deep inside CityLearn or as a NaN loss hours into training, and a series in W instead
of kW silently trains a controller for a site a thousand times too big. Each check raises a
:class:`SiteDataError` naming the file, the column or session and what would be valid.

Units are judged by the calibration figures the config already states: PV may not exceed the
inverter's AC limit and its yield must be near ``pv.specific_yield_range``; the mall's energy must
be near ``mall.annual_kwh``. A factor of 1,000 (W for kW) is far outside both.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from iquitos_lightning.errors import ConfigError
from iquitos_lightning.site.series import SESSION_COLUMNS, SiteSeries

# Plausibility margin around the calibration targets: a week or a cloudy month differs from the
# annual figure, a unit error (x1000) never falls inside.
UNIT_TOLERANCE = 3.0
REBUILD_HINT = "rebuild it with `python -m iquitos_lightning build-site --site <profile> --force`, or fix the file"


class SiteDataError(ConfigError):
    """A built site's files or series are missing, incomplete or implausible."""


def check_files(folder: Path, hours: int, files: dict[str, int]) -> None:
    """Every file of ``files`` (relative path -> data rows it must have) exists with that many rows."""
    for relative, rows in files.items():
        path = folder / relative
        if not path.is_file():
            raise SiteDataError(f"site data {path}: file missing; {REBUILD_HINT}")
        found = _data_rows(path)
        if found != rows:
            raise SiteDataError(
                f"site data {path}: {found} data rows, expected {rows} (calendar of {hours} hours); the file is "
                f"short or from another calendar; {REBUILD_HINT}"
            )


def _data_rows(path: Path) -> int:
    with open(path, "rb") as handle:
        lines = sum(1 for line in handle if line.strip())
    return max(lines - 1, 0)  # the header


def check_series(series: SiteSeries, source: str) -> None:
    """Lengths, NaN, signs and units of every series, then the EV sessions."""
    config = series.config
    hours = config.hours
    for name in ("pv_kw", "mall_kw", "price_per_kwh", "carbon_intensity_kg_per_kwh", "temperature_c", "humidity_pct"):
        values = np.asarray(getattr(series, name), dtype=float)
        if len(values) != hours:
            raise SiteDataError(f"{source}: column {name} has {len(values)} values, expected {hours}; {REBUILD_HINT}")
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise SiteDataError(
                f"{source}: column {name} has {bad.size} NaN/infinite values, first at row {int(bad[0])} "
                f"(hour {int(bad[0])}); every hour needs a finite value"
            )
        if name != "temperature_c" and values.min() < 0:
            row = int(np.argmin(values))
            raise SiteDataError(f"{source}: column {name} is negative at row {row} ({values[row]}); must be >= 0")
    _check_units(series, source)
    check_sessions(series.sessions, config.ev.socket_count, hours, source)


def _check_units(series: SiteSeries, source: str) -> None:
    config = series.config
    scale_to_year = 365 / config.calendar.days
    pv_peak = float(series.pv_kw.max())
    if pv_peak > 1.05 * config.pv.ac_limit_kw:
        raise SiteDataError(
            f"{source}: column pv_kw peaks at {pv_peak:,.1f}, above pv.ac_limit_kw = {config.pv.ac_limit_kw:,.1f} kW: "
            f"wrong units? (W instead of kW is {pv_peak / 1000:,.1f} kW); the series must be in kW"
        )
    low, high = config.pv.specific_yield_range
    specific_yield = float(series.pv_kw.sum()) * scale_to_year / config.pv.dc_kwp
    if not low / UNIT_TOLERANCE <= specific_yield <= high * UNIT_TOLERANCE:
        raise SiteDataError(
            f"{source}: column pv_kw gives {specific_yield:,.0f} kWh/kWp/yr, far from pv.specific_yield_range "
            f"[{low:,.0f}, {high:,.0f}]: wrong units (kW expected) or a PV size (pv.dc_kwp) that does not match"
        )
    mall_annual = float(series.mall_kw.sum()) * scale_to_year
    target = config.mall.annual_kwh
    if not target / UNIT_TOLERANCE <= mall_annual <= target * UNIT_TOLERANCE:
        raise SiteDataError(
            f"{source}: column mall_kw gives {mall_annual:,.0f} kWh/yr, far from mall.annual_kwh = {target:,.0f}: "
            f"wrong units (kW expected; W gives x1000) or a mall.annual_kwh that does not match the data"
        )
    humidity = float(series.humidity_pct.max())
    if humidity > 100:
        raise SiteDataError(f"{source}: column humidity_pct reaches {humidity:,.1f}; must be a percentage in [0, 100]")
    temperature = series.temperature_c
    if temperature.min() < -60 or temperature.max() > 60:
        raise SiteDataError(
            f"{source}: column temperature_c spans [{temperature.min():.1f}, {temperature.max():.1f}]; degrees "
            "Celsius in [-60, 60] expected (Kelvin or Fahrenheit?)"
        )


def check_sessions(sessions: pd.DataFrame, sockets: int, hours: int, source: str) -> None:
    """Columns, ranges and, per socket, no two sessions plugged in at the same hour."""
    missing = [column for column in SESSION_COLUMNS if column not in sessions.columns]
    if missing:
        raise SiteDataError(f"{source}: sessions lack the columns {missing}; expected {list(SESSION_COLUMNS)}")
    if sessions[list(SESSION_COLUMNS)].isna().to_numpy().any():
        row = int(np.flatnonzero(sessions[list(SESSION_COLUMNS)].isna().any(axis=1).to_numpy())[0])
        raise SiteDataError(f"{source}: session row {row} has an empty value; every column is required")
    checks = (
        (sessions["socket"].between(0, sockets - 1), f"socket must be in [0, {sockets - 1}] (the site's sockets)"),
        (sessions["arrival_step"] >= 0, "arrival_step must be >= 0"),
        (sessions["departure_step"] > sessions["arrival_step"], "departure_step must be after arrival_step"),
        (sessions["arrival_soc"].between(0, 1), "arrival_soc must be a fraction in [0, 1]"),
        (sessions["required_soc"].between(0, 1), "required_soc must be a fraction in [0, 1]"),
    )
    for valid, rule in checks:
        bad = np.flatnonzero(~valid.to_numpy())
        if bad.size:
            raise SiteDataError(f"{source}: session row {int(bad[0])}: {rule} ({bad.size} rows fail)")
    ordered = sessions.reset_index(names="row").sort_values(["socket", "arrival_step"], kind="stable")
    same_socket = ordered["socket"].to_numpy()[1:] == ordered["socket"].to_numpy()[:-1]
    overlaps = same_socket & (ordered["arrival_step"].to_numpy()[1:] < ordered["departure_step"].to_numpy()[:-1])
    if overlaps.any():
        index = int(np.flatnonzero(overlaps)[0])
        first, second = ordered.iloc[index], ordered.iloc[index + 1]
        raise SiteDataError(
            f"{source}: socket {int(first['socket'])} has overlapping sessions: row {int(first['row'])} "
            f"(hours {int(first['arrival_step'])}-{int(first['departure_step'])}) and row {int(second['row'])} "
            f"(from hour {int(second['arrival_step'])}); a socket holds one EV at a time"
        )
