"""Build a site's dataset: the in-memory :class:`SiteSeries` and its CityLearn 3 schema + CSVs.

Why a cached builder: every command (baselines, training, tests) needs the same data; building the
default year takes seconds, so a folder is reused when its stored config hash matches
(``build_hash.txt``, written last, so an interrupted build is never taken for a finished one).
Same config -> byte-identical files (every draw is seeded from ``config.seed``). A cached folder is
checked before use (:mod:`iquitos_lightning.site.validate`: files present with one row per hour, no
NaN, plausible units, no overlapping sessions), since it may have been edited or truncated.

The CityLearn mapping (one building, central agent, offline, nothing autosized):
- the mall is the building's ``non_shiftable_load``; PV is a ``PV`` device in ``absolute`` mode
  whose ``solar_generation`` column is our AC series in kWh per step, so CityLearn's PV output is
  our series exactly (all series are rounded to float32 first, CityLearn's own precision);
- the BESS is a ``Battery`` with flat power-efficiency and capacity-power curves, no capacity fade,
  no standby loss and ``depth_of_discharge = 1 - soc_min``. CityLearn applies sqrt(efficiency)
  on each way (``StorageDevice.round_trip_efficiency`` is ``efficiency ** 0.5``), so its
  ``efficiency`` attribute must be the ROUND TRIP (0.90), which yields the one-way
  ``bess.one_way_efficiency`` on charge and on discharge (the test checks the AC round trip);
- every CityLearn table has one row more than the calendar (a copy of the last hour, no EV):
  CityLearn acts on T-1 of T rows, so the extra row makes the episode ``config.hours`` actions;
- one charger per socket (``max_charging_power`` = socket kW, efficiency 1, no discharge) and one
  EV per socket, reused by every session on that socket: a charger CSV marks state 1 while a
  session is plugged in (3 = away otherwise), gives the EV id, a distinct ``electric_vehicle_session_id`` per visit
  (CityLearn re-applies the arrival SOC only when the session id changes), the steps to
  departure, the required SOC, and ``electric_vehicle_current_soc`` = the arrival SOC on the
  arrival step only (CityLearn forces the battery to it on a new connection). The EV batteries
  are lossless with flat curves and ``nominal_power`` = the charger power, so a charger action a
  adds a x charger kW x 1 h to the battery until it is full (SOC 1; CityLearn does not stop at
  the required SOC: the reward must not pay for energy beyond it).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from iquitos_lightning.console import command_console
from iquitos_lightning.site import demand, pv
from iquitos_lightning.site.charger_files import charger_csv_texts, charger_id, ev_name
from iquitos_lightning.site.config import (
    BatteryConfig,
    CalendarConfig,
    EVConfig,
    EVFleetConfig,
    GridConfig,
    LocationConfig,
    MallLoadConfig,
    PVConfig,
    SiteConfig,
    WeatherConfig,
)
from iquitos_lightning.site.series import SESSION_COLUMNS, SiteSeries
from iquitos_lightning.site.validate import SiteDataError, check_files, check_series

HASH_FILE = "build_hash.txt"
# Bump when the builder's output changes for the same config: old cached folders are then rebuilt.
BUILDER_VERSION = 1
CONFIG_FILE = "site_config.json"
SERIES_FILE = "series.csv"
SESSIONS_FILE = "sessions.csv"
CALIBRATION_FILE = "calibration.json"
SCHEMA_FILE = "schema.json"
BUILDING_NAME = "mall"
CHARGER_DIR = "chargers"
SERIES_COLUMNS = (
    "pv_kw",
    "mall_kw",
    "price_per_kwh",
    "carbon_intensity_kg_per_kwh",
    "temperature_c",
    "humidity_pct",
    "ghi_w_m2",
    "dni_w_m2",
    "dhi_w_m2",
)
# CityLearn observations left active in the schema (the Gymnasium wrapper builds its own vector).
SCHEMA_OBSERVATIONS = (
    "month",
    "day_type",
    "hour",
    "outdoor_dry_bulb_temperature",
    "solar_generation",
    "non_shiftable_load",
    "electrical_storage_soc",
    "net_electricity_consumption",
    "electricity_pricing",
    "electricity_pricing_predicted_1",
    "electricity_pricing_predicted_2",
    "electricity_pricing_predicted_3",
    "carbon_intensity",
    "electric_vehicle_charger_connected_state",
    "connected_electric_vehicle_at_charger_soc",
    "connected_electric_vehicle_at_charger_required_soc_departure",
    "connected_electric_vehicle_at_charger_departure_time",
)


@dataclass
class BuildResult:
    """One built (or cached) site: where its files are and what they hold."""

    path: Path
    schema_path: Path
    series: SiteSeries
    calibration: dict[str, Any]
    cached: bool


# Built folders this process has read and checked, with the stamp (size, mtime) of every file they were read from.
_READ_BACK: dict[str, tuple[tuple[tuple[str, int, int], ...], BuildResult]] = {}


def _read_back(path: Path, config: SiteConfig) -> BuildResult:
    """A built folder's dataset, checked (files complete, series plausible) and read back; from this process's
    earlier read while none of its files has changed since (a copy: callers get their own arrays).

    Why the process keeps it: a fit reads each of its site years about twice (the twin, the reference runs, the
    evaluation envs), ~0.5 s a read of a full year on the 2-core machine; a file edited, truncated or removed since
    changes its stamp, so it is checked and read again."""
    data_files = expected_files(config)
    stamp = tuple(
        _stamp(path / name, name)
        for name in (*data_files, HASH_FILE, CONFIG_FILE, SCHEMA_FILE, CALIBRATION_FILE, SESSIONS_FILE)
    )
    folder = str(path.resolve())
    kept = _READ_BACK.get(folder)
    if kept is not None and kept[0] == stamp:
        return copy.deepcopy(kept[1])
    check_files(path, config.hours, data_files)
    series = load_series(path)
    check_series(series, str(path / SERIES_FILE))
    result = BuildResult(
        path=path,
        schema_path=path / SCHEMA_FILE,
        series=series,
        calibration=json.loads((path / CALIBRATION_FILE).read_text()),
        cached=True,
    )
    _READ_BACK[folder] = (stamp, copy.deepcopy(result))
    return result


def _stamp(file: Path, name: str) -> tuple[str, int, int]:
    try:
        status = file.stat()
    except OSError:
        return (name, -1, -1)  # missing: check_files names it
    return (name, status.st_size, status.st_mtime_ns)


def build_site(
    config: SiteConfig,
    out_dir: Path | None = None,
    *,
    force: bool = False,
    progress: bool = True,
) -> BuildResult:
    """Generate ``config``'s series and write its CityLearn dataset to ``out_dir`` (default ``data/<name>``).

    A folder whose ``build_hash.txt`` equals ``config.content_hash()`` is read back instead
    (``cached=True``) unless ``force``.
    """
    path = Path("data") / config.name if out_dir is None else Path(out_dir)
    wanted_hash = f"{config.content_hash()}-v{BUILDER_VERSION}"
    hash_path = path / HASH_FILE
    if not force and hash_path.is_file() and hash_path.read_text().strip() == wanted_hash:
        return _read_back(path, config)

    steps = ("PV and weather (pvlib)", "mall load", "EV sessions", "CityLearn files")
    with _progress(progress) as bar:
        task = bar.add_task("building site", total=len(steps))
        bar.update(task, description=steps[0])
        pv_result = pv.simulate_pv(config)
        bar.advance(task)
        bar.update(task, description=steps[1])
        times = pv_result.times
        month = times.month.to_numpy() - 1
        hour = times.hour.to_numpy()
        mall_kw = demand.mall_load(config, month, hour)
        bar.advance(task)
        bar.update(task, description=steps[2])
        ev = demand.ev_sessions(config)
        bar.advance(task)
        bar.update(task, description=steps[3])
        series = SiteSeries(
            config=config,
            pv_kw=_f32(pv_result.pv_kw),
            mall_kw=_f32(mall_kw),
            price_per_kwh=_f32(np.array([config.grid.price_at_hour(int(h)) for h in hour])),
            carbon_intensity_kg_per_kwh=_f32(np.full(config.hours, config.grid.carbon_intensity_kg_per_kwh)),
            temperature_c=_f32(pv_result.temperature_c),
            humidity_pct=_f32(pv_result.humidity_pct),
            ghi_w_m2=_f32(pv_result.ghi_w_m2),
            dni_w_m2=_f32(pv_result.dni_w_m2),
            dhi_w_m2=_f32(pv_result.dhi_w_m2),
            sessions=ev.sessions,
        )
        calibration = _calibration(series, pv_result.calibration, ev)
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.building-", dir=path.parent))
        try:
            _write_dataset(staging, series, times, pv_result)
            (staging / CALIBRATION_FILE).write_text(json.dumps(calibration, indent=2, sort_keys=True) + "\n")
            (staging / HASH_FILE).write_text(wanted_hash + "\n")
            _install_folder(staging, path, wanted_hash)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        bar.advance(task)
    return BuildResult(path=path, schema_path=path / SCHEMA_FILE, series=series, calibration=calibration, cached=False)


def _install_folder(staging: Path, path: Path, wanted_hash: str) -> None:
    """Put a fully written dataset folder at ``path`` with renames only, so no reader sees a half-written one.

    Why: ``compare --jobs 2`` on a fresh clone starts two runs that both find no dataset and build it at once;
    writing in place, the second crashed on the first's half-made folder (``FileExistsError: .../chargers``).
    Each builder writes its own staging folder beside ``path``; an old folder is renamed aside and deleted; if
    another builder installed the same dataset first (same hash), its copy is kept and this one dropped.
    """
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    if path.exists():
        path.rename(old)
    try:
        staging.rename(path)
    except OSError:  # another process installed its copy between the two renames
        installed = path / HASH_FILE
        if not (installed.is_file() and installed.read_text().strip() == wanted_hash):
            raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


def expected_files(config: SiteConfig) -> dict[str, int]:
    """Every file of a built folder and the data rows it holds (CityLearn tables have one extra row: ``_pad``)."""
    hours = config.hours
    tables = ("building.csv", "weather.csv", "carbon_intensity.csv", "pricing.csv")
    chargers = {f"{CHARGER_DIR}/{charger_id(socket)}.csv": hours + 1 for socket in range(config.ev.socket_count)}
    return {SERIES_FILE: hours, **{name: hours + 1 for name in tables}, **chargers}


def load_series(path: Path) -> SiteSeries:
    """Read a built site's :class:`SiteSeries` back from its folder (``series.csv``, ``sessions.csv``)."""
    path = Path(path)
    for name in (CONFIG_FILE, SCHEMA_FILE, CALIBRATION_FILE, SERIES_FILE, SESSIONS_FILE):
        if not (path / name).is_file():
            raise SiteDataError(f"site data {path / name}: file missing; rebuild with build-site --force")
    config = site_config_from_dict(json.loads((path / CONFIG_FILE).read_text()))
    table = pd.read_csv(path / SERIES_FILE, float_precision="round_trip")
    sessions = pd.read_csv(path / SESSIONS_FILE, float_precision="round_trip")
    for name, frame, columns in ((SERIES_FILE, table, SERIES_COLUMNS), (SESSIONS_FILE, sessions, SESSION_COLUMNS)):
        missing = [column for column in columns if column not in frame.columns]
        if missing:
            raise SiteDataError(f"site data {path / name}: columns {missing} missing; expected {list(columns)}")
    return SiteSeries(
        config=config,
        sessions=sessions[list(SESSION_COLUMNS)],
        **{name: table[name].to_numpy(float) for name in SERIES_COLUMNS},
    )


def site_config_from_dict(data: dict[str, Any]) -> SiteConfig:
    """Rebuild a :class:`SiteConfig` from ``SiteConfig.to_dict()`` (validation runs again)."""
    ev_data = dict(data["ev"])
    ev_data["fleets"] = [EVFleetConfig(**fleet) for fleet in ev_data["fleets"]]
    return SiteConfig(
        name=data["name"],
        seed=data["seed"],
        location=LocationConfig(**data["location"]),
        calendar=CalendarConfig(**data["calendar"]),
        pv=PVConfig(**data["pv"]),
        weather=WeatherConfig(**data["weather"]),
        mall=MallLoadConfig(**data["mall"]),
        ev=EVConfig(**ev_data),
        bess=BatteryConfig(**data["bess"]),
        grid=GridConfig(**data["grid"]),
    )


def socket_occupancy(series: SiteSeries) -> float:
    """Share of socket-hours within opening hours that hold an EV."""
    ev = series.config.ev
    sessions = series.sessions
    occupied = float((sessions["departure_step"] - sessions["arrival_step"]).sum())
    open_hours = series.config.calendar.days * (ev.close_hour - ev.open_hour) * ev.socket_count
    return occupied / open_hours


# The site section each calibration figure follows from (for the "from" column of a site built over a base).
FIGURE_SECTIONS = {
    "PV specific yield": "pv",
    "PV performance ratio": "pv",
    "annual GHI": "pv",
    "mall energy (full year)": "mall",
    "mall max": "mall",
    "EV energy": "ev",
    "EV sessions": "ev",
    "dropped arrivals": "ev",
    "socket occupancy": "ev",
}


def print_calibration(
    result: BuildResult, console: Console | None = None, sources: dict[str, str] | None = None
) -> None:
    """A rich table of the build's calibration figures beside the docs/site.md targets.

    ``sources`` (:func:`~iquitos_lightning.site.config.section_sources` of the site file) adds a "from" column:
    which figures the file decided and which it took from its ``base``.
    """
    console = console or command_console()
    config = result.series.config
    figures = result.calibration
    low, high = config.pv.specific_yield_range
    rows = [
        ("PV specific yield", f"{figures['pv_specific_yield_kwh_kwp']:,.0f} kWh/kWp/yr", f"{low:,.0f}-{high:,.0f}"),
        ("PV performance ratio", f"{figures['pv_performance_ratio']:.3f}", "about 0.80"),
        ("annual GHI", f"{figures['annual_ghi_kwh_m2']:,.0f} kWh/m2", f"{config.pv.annual_ghi_kwh_m2:,.0f}"),
        ("mall energy (full year)", f"{figures['mall_annual_kwh']:,.0f} kWh/yr", f"{config.mall.annual_kwh:,.0f}"),
        ("mall max", f"{figures['mall_max_kw']:,.0f} kW", "about 2,763 (default site)"),
        (
            "EV energy",
            f"{figures['ev_energy_kwh_per_day']:,.1f} kWh/day",
            f"{config.ev.daily_energy_kwh:,.1f} +/- 15 %",
        ),
        ("EV sessions", f"{figures['ev_sessions_per_day']:,.1f} /day", "-"),
        ("dropped arrivals", f"{figures['ev_dropped_arrivals']:,}", "few"),
        ("socket occupancy", f"{100 * figures['socket_occupancy']:.1f} % of open hours", "-"),
    ]
    table = Table(title=f"Site {config.name}: calibration ({'cached' if result.cached else 'built'} at {result.path})")
    inherits = sources is not None and any(source != "file" for source in sources.values())
    for column in ("figure", "built", "target", *(("from",) if inherits else ())):
        table.add_column(column)
    for row in rows:
        table.add_row(*row, *((sources.get(FIGURE_SECTIONS[row[0]], "file"),) if inherits else ()))
    console.print(table)


def _calibration(series: SiteSeries, pv_figures: dict[str, float], ev: demand.EVSessions) -> dict[str, Any]:
    """The figures ``print_calibration`` shows; mall energy is scaled to a full year for short calendars."""
    config = series.config
    sessions = series.sessions
    battery = series.socket_battery_kwh[sessions["socket"].to_numpy()]
    charger = series.socket_charger_kw[sessions["socket"].to_numpy()]
    need = (sessions["required_soc"] - sessions["arrival_soc"]).to_numpy() * battery
    dwell = (sessions["departure_step"] - sessions["arrival_step"]).to_numpy()
    deliverable = np.minimum(need, charger * dwell)
    days = config.calendar.days
    return {
        "config_hash": config.content_hash(),
        "hours": config.hours,
        "pv_specific_yield_kwh_kwp": pv_figures["specific_yield_kwh_kwp"],
        "pv_performance_ratio": pv_figures["performance_ratio"],
        "annual_ghi_kwh_m2": pv_figures["annual_ghi_kwh_m2"],
        "annual_poa_kwh_m2": pv_figures["annual_poa_kwh_m2"],
        "pv_monthly_shape_max_error": pv_figures["monthly_shape_max_error"],
        "pv_kwh": float(series.pv_kw.sum()),
        "mall_kwh": float(series.mall_kw.sum()),
        "mall_annual_kwh": float(series.mall_kw.sum()) * 365 / days,
        "mall_max_kw": float(series.mall_kw.max()),
        "ev_energy_kwh_per_day": float(deliverable.sum() / days),
        "ev_need_kwh_per_day": float(need.sum() / days),
        "ev_sessions_per_day": len(sessions) / days,
        "ev_arrivals_per_day": ev.arrivals_per_day,
        "ev_dropped_arrivals": ev.dropped,
        "ev_mean_dwell_h": float(dwell.mean()) if len(dwell) else 0.0,
        "socket_occupancy": socket_occupancy(series),
    }


def _write_dataset(path: Path, series: SiteSeries, times: pd.DatetimeIndex, pv_result: pv.PVResult) -> None:
    config = series.config
    rng = np.random.default_rng([config.seed, 3])
    (path / CONFIG_FILE).write_text(json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n")
    table = pd.DataFrame({name: getattr(series, name) for name in SERIES_COLUMNS})
    table.to_csv(path / SERIES_FILE, index=False)
    series.sessions.to_csv(path / SESSIONS_FILE, index=False)

    hours = series.hours
    zeros = np.zeros(hours)
    pd.DataFrame(
        {
            "month": times.month,
            "hour": times.hour + 1,  # CityLearn counts hours 1..24 (hour ending)
            "day_type": times.dayofweek + 1,
            "daylight_savings_status": np.zeros(hours, dtype=int),
            "indoor_dry_bulb_temperature": series.temperature_c,
            "average_unmet_cooling_setpoint_difference": zeros,
            "indoor_relative_humidity": series.humidity_pct,
            "non_shiftable_load": series.mall_kw,
            "dhw_demand": zeros,
            "cooling_demand": zeros,
            "heating_demand": zeros,
            "solar_generation": series.pv_kw,
            "occupant_count": zeros,
            "power_outage": np.zeros(hours, dtype=int),
        }
    ).pipe(_pad).to_csv(path / "building.csv", index=False)

    weather = {
        "outdoor_dry_bulb_temperature": series.temperature_c,
        "outdoor_relative_humidity": series.humidity_pct,
        "diffuse_solar_irradiance": series.dhi_w_m2,
        "direct_solar_irradiance": series.dni_w_m2,
    }
    for name, values in list(weather.items()):
        for step, forecast in enumerate(pv.forecasts(values, rng), start=1):
            weather[f"{name}_predicted_{step}"] = _f32(forecast)
    pd.DataFrame(weather).pipe(_pad).to_csv(path / "weather.csv", index=False)

    pd.DataFrame({"carbon_intensity": series.carbon_intensity_kg_per_kwh}).pipe(_pad).to_csv(
        path / "carbon_intensity.csv", index=False
    )
    price = series.price_per_kwh
    pd.DataFrame(
        {
            "electricity_pricing": price,
            **{
                f"electricity_pricing_predicted_{k}": np.concatenate([price[k:], price[-1:].repeat(k)])
                for k in (1, 2, 3)
            },
        }
    ).pipe(_pad).to_csv(path / "pricing.csv", index=False)

    (path / CHARGER_DIR).mkdir()
    for socket, text in enumerate(charger_csv_texts(series)):
        (path / CHARGER_DIR / f"{charger_id(socket)}.csv").write_text(text)
    (path / SCHEMA_FILE).write_text(json.dumps(_schema(series), indent=2) + "\n")


def _schema(series: SiteSeries) -> dict[str, Any]:
    config = series.config
    bess = config.bess
    sockets = config.ev.socket_count
    chargers = {
        charger_id(socket): {
            "type": "citylearn.electric_vehicle_charger.Charger",
            "charger_simulation": f"{CHARGER_DIR}/{charger_id(socket)}.csv",
            "attributes": {
                "nominal_power": float(series.socket_charger_kw[socket]),
                "max_charging_power": float(series.socket_charger_kw[socket]),
                "min_charging_power": 0.0,
                "max_discharging_power": 0.0,
                "min_discharging_power": 0.0,
                "efficiency": 1.0,
            },
        }
        for socket in range(sockets)
    }
    electric_vehicles = {
        ev_name(socket): {
            "include": True,
            "battery": {
                "type": "citylearn.energy_model.Battery",
                "attributes": {
                    "capacity": float(series.socket_battery_kwh[socket]),
                    "nominal_power": float(series.socket_charger_kw[socket]),
                    "initial_soc": float(config.ev.arrival_soc_mean),
                    "depth_of_discharge": 1.0,
                    "efficiency": 1.0,
                    "loss_coefficient": 0.0,
                    "capacity_loss_coefficient": 0.0,
                    "power_efficiency_curve": [[0.0, 1.0], [1.0, 1.0]],
                    "capacity_power_curve": [[0.0, 1.0], [1.0, 1.0]],
                },
            },
        }
        for socket in range(sockets)
    }
    return {
        "random_seed": config.seed,
        "root_directory": None,
        "central_agent": True,
        "simulation_start_time_step": 0,
        "simulation_end_time_step": series.hours,
        "episode_time_steps": None,
        "rolling_episode_split": False,
        "random_episode_split": False,
        "seconds_per_time_step": 3600,
        "observations": {
            name: {"active": name in SCHEMA_OBSERVATIONS, "shared_in_central_agent": False}
            for name in SCHEMA_OBSERVATIONS
        },
        "actions": {
            "electrical_storage": {"active": True},
            "electric_vehicle_storage": {"active": True},
        },
        "agent": {"type": "citylearn.agents.base.BaselineAgent", "attributes": {}},
        "reward_function": {"type": "citylearn.reward_function.RewardFunction", "attributes": {}},
        "buildings": {
            BUILDING_NAME: {
                "include": True,
                "energy_simulation": "building.csv",
                "weather": "weather.csv",
                "carbon_intensity": "carbon_intensity.csv",
                "pricing": "pricing.csv",
                "inactive_observations": [],
                "inactive_actions": [],
                "noise_std": 0.0,
                "pv": {
                    "type": "citylearn.energy_model.PV",
                    "autosize": False,
                    "attributes": {"nominal_power": config.pv.dc_kwp, "generation_mode": "absolute"},
                },
                "electrical_storage": {
                    "type": "citylearn.energy_model.Battery",
                    "autosize": False,
                    "attributes": {
                        "capacity": bess.capacity_kwh,
                        "nominal_power": bess.power_kw,
                        # CityLearn applies sqrt(efficiency) per way: this is the round trip.
                        "efficiency": bess.one_way_efficiency**2,
                        "loss_coefficient": 0.0,
                        "capacity_loss_coefficient": 0.0,
                        "depth_of_discharge": 1.0 - bess.soc_min,
                        "initial_soc": bess.initial_soc,
                        "power_efficiency_curve": [
                            [0.0, bess.one_way_efficiency**2],
                            [1.0, bess.one_way_efficiency**2],
                        ],
                        "capacity_power_curve": [[0.0, 1.0], [1.0, 1.0]],
                    },
                },
                "chargers": chargers,
            }
        },
        "electric_vehicles_def": electric_vehicles,
    }


def _pad(frame: pd.DataFrame) -> pd.DataFrame:
    """Repeat the last row once: CityLearn takes T-1 actions on T rows, and an episode must have T actions."""
    return pd.concat([frame, frame.iloc[-1:]], ignore_index=True)


def _f32(values: np.ndarray) -> np.ndarray:
    """Round to float32 (CityLearn's precision) and back, so our series and CityLearn's agree exactly."""
    return np.asarray(values, dtype=np.float32).astype(np.float64)


class _NoProgress:
    def __enter__(self) -> _NoProgress:
        return self

    def __exit__(self, *args: object) -> None:
        return None

    def add_task(self, *args: Any, **kwargs: Any) -> int:
        return 0

    def update(self, *args: Any, **kwargs: Any) -> None:
        return None

    def advance(self, *args: Any, **kwargs: Any) -> None:
        return None


def _progress(enabled: bool) -> Progress | _NoProgress:
    if not enabled:
        return _NoProgress()
    return Progress(
        TextColumn("{task.description:<28}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
    )
