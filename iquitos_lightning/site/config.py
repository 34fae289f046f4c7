"""The site configuration: every physical figure of the simulated place, typed and validated.

Why dataclasses: LightningCLI/jsonargparse read them natively, so a profile is a YAML file
checked against these types (unknown keys and wrong types are refused by jsonargparse), and
each ``__post_init__`` refuses physically meaningless values with a message naming the field.
The defaults are the "iquitos-2026" profile of ``docs/site.md``; ``configs/site/*.yaml``
spell them out so a user can build other sites without touching code.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jsonargparse import ArgumentParser

from iquitos_lightning.errors import ConfigError

HOURS_PER_DAY = 24
MONTHS_PER_YEAR = 12


class SiteConfigError(ConfigError):
    """A site configuration value is invalid; the message names the field and what is valid."""


def _require(condition: bool, field_name: str, message: str) -> None:
    if not condition:
        raise SiteConfigError(f"{field_name}: {message}")


def _require_positive(value: float, field_name: str) -> None:
    _require(math.isfinite(value) and value > 0, field_name, f"must be > 0, got {value!r}")


def _require_non_negative(value: float, field_name: str) -> None:
    _require(math.isfinite(value) and value >= 0, field_name, f"must be >= 0, got {value!r}")


def _require_fraction(value: float, field_name: str) -> None:
    _require(math.isfinite(value) and 0.0 <= value <= 1.0, field_name, f"must be in [0, 1], got {value!r}")


def _require_hour(value: int, field_name: str, *, allow_24: bool = False) -> None:
    upper = 24 if allow_24 else 23
    _require(0 <= value <= upper, field_name, f"must be an hour in [0, {upper}], got {value!r}")


def _require_length(values: list[float], length: int, field_name: str) -> None:
    _require(len(values) == length, field_name, f"needs exactly {length} values, got {len(values)}")
    for index, value in enumerate(values):
        _require_non_negative(value, f"{field_name}[{index}]")


@dataclass
class LocationConfig:
    """Where the site is: position for the sun, time zone for the calendar."""

    name: str = "Mall de Iquitos, Loreto, Peru"
    latitude: float = -3.75
    longitude: float = -73.25
    altitude_m: float = 104.0
    # Fixed UTC offset in hours; Peru has no daylight saving time.
    utc_offset_hours: int = -5

    def __post_init__(self) -> None:
        _require(-90 <= self.latitude <= 90, "location.latitude", f"must be in [-90, 90], got {self.latitude}")
        _require(-180 <= self.longitude <= 180, "location.longitude", f"must be in [-180, 180], got {self.longitude}")
        _require(-14 <= self.utc_offset_hours <= 14, "location.utc_offset_hours", "must be in [-14, 14]")


@dataclass
class CalendarConfig:
    """The simulated period: one episode, hourly steps, starting on 1 January of ``year``."""

    year: int = 2025
    # Number of days simulated from 1 January; 365 is the full (non-leap) year.
    days: int = 365

    def __post_init__(self) -> None:
        _require(1900 <= self.year <= 2200, "calendar.year", f"must be in [1900, 2200], got {self.year}")
        _require(1 <= self.days <= 365, "calendar.days", f"must be in [1, 365], got {self.days}")

    @property
    def hours(self) -> int:
        return self.days * HOURS_PER_DAY


@dataclass
class PVConfig:
    """Rooftop PV plant and the irradiance calibration targets (docs/site.md, "PV plant")."""

    dc_kwp: float = 4162.0
    ac_limit_kw: float = 3201.0
    tilt_deg: float = 10.0
    # pvlib convention: 0 = north-facing, 180 = south-facing.
    azimuth_deg: float = 0.0
    # Calibration target for the seeded cloudiness process (PVGIS TMY figure for the site).
    annual_ghi_kwh_m2: float = 1670.0
    # Monthly PV energy of the original project, used as the monthly SHAPE only (MWh, Jan..Dec).
    monthly_shape_mwh: list[float] = field(
        default_factory=lambda: [677, 591, 717, 669, 697, 687, 719, 760, 728, 742, 679, 627]
    )
    # DC losses other than temperature (soiling, wiring, mismatch, availability), as in PVWatts.
    system_losses: float = 0.12
    # Power temperature coefficient of the modules, 1/degC.
    temperature_coefficient_per_c: float = -0.004
    inverter_efficiency: float = 0.97
    # Hour-to-hour persistence of the cloudiness process (AR(1) coefficient).
    cloudiness_persistence: float = 0.7
    # Plausibility window for the builder's calibration check (kWh/kWp/yr).
    specific_yield_range: list[float] = field(default_factory=lambda: [1300.0, 1400.0])

    def __post_init__(self) -> None:
        _require_positive(self.dc_kwp, "pv.dc_kwp")
        _require_positive(self.ac_limit_kw, "pv.ac_limit_kw")
        _require(0 <= self.tilt_deg <= 90, "pv.tilt_deg", f"must be in [0, 90], got {self.tilt_deg}")
        _require(0 <= self.azimuth_deg < 360, "pv.azimuth_deg", f"must be in [0, 360), got {self.azimuth_deg}")
        _require_positive(self.annual_ghi_kwh_m2, "pv.annual_ghi_kwh_m2")
        _require(self.annual_ghi_kwh_m2 < 3000, "pv.annual_ghi_kwh_m2", "above 3000 kWh/m2/yr is not on Earth")
        _require_length(self.monthly_shape_mwh, MONTHS_PER_YEAR, "pv.monthly_shape_mwh")
        _require(sum(self.monthly_shape_mwh) > 0, "pv.monthly_shape_mwh", "must not be all zero")
        _require(0 <= self.system_losses < 1, "pv.system_losses", f"must be in [0, 1), got {self.system_losses}")
        _require(
            -0.02 <= self.temperature_coefficient_per_c <= 0,
            "pv.temperature_coefficient_per_c",
            "must be in [-0.02, 0]",
        )
        _require(0 < self.inverter_efficiency <= 1, "pv.inverter_efficiency", "must be in (0, 1]")
        _require(0 <= self.cloudiness_persistence < 1, "pv.cloudiness_persistence", "must be in [0, 1)")
        _require(
            len(self.specific_yield_range) == 2 and 0 < self.specific_yield_range[0] < self.specific_yield_range[1],
            "pv.specific_yield_range",
            "must be [low, high] with 0 < low < high",
        )


@dataclass
class WeatherConfig:
    """The weather the environment observes (and the PV cell temperature model uses)."""

    temperature_mean_c: float = 26.5
    # Peak-to-trough daily swing: about 22-32 degC around the mean.
    temperature_daily_swing_c: float = 9.0
    humidity_min_pct: float = 80.0
    humidity_max_pct: float = 90.0
    wind_speed_m_s: float = 1.5

    def __post_init__(self) -> None:
        _require(-50 <= self.temperature_mean_c <= 50, "weather.temperature_mean_c", "must be in [-50, 50] degC")
        _require_non_negative(self.temperature_daily_swing_c, "weather.temperature_daily_swing_c")
        _require(
            0 <= self.humidity_min_pct <= self.humidity_max_pct <= 100,
            "weather.humidity_min_pct/humidity_max_pct",
            "must satisfy 0 <= min <= max <= 100",
        )
        _require_non_negative(self.wind_speed_m_s, "weather.wind_speed_m_s")


@dataclass
class MallLoadConfig:
    """The mall's non-shiftable load (docs/site.md, "Mall load")."""

    annual_kwh: float = 12_368_653.0
    # Monthly energy (MWh, Jan..Dec), used as the monthly shape: scaled so a full year sums to
    # ``annual_kwh`` (a shorter calendar keeps the same kWh per day of each month).
    monthly_mwh: list[float] = field(
        default_factory=lambda: [1067, 1017, 1009, 1000, 990, 938, 1005, 1041, 1093, 1103, 1048, 1056]
    )
    # Typical daily shape in kW, hour 0..23 (night ~450-530 kW, plateau 2,150-2,280 kW 11-20 h,
    # ~1,228 kW at 22 h); it is scaled so each month meets its energy and the year ``annual_kwh``.
    hourly_shape_kw: list[float] = field(
        default_factory=lambda: [
            500,
            480,
            465,
            455,
            450,
            460,
            520,
            700,
            1000,
            1450,
            1850,
            2150,
            2200,
            2230,
            2250,
            2260,
            2270,
            2280,
            2270,
            2240,
            2180,
            1700,
            1228,
            760,
        ]
    )
    # Relative standard deviation of the hour-to-hour noise (seeded, mean-preserving).
    noise_relative_std: float = 0.05

    def __post_init__(self) -> None:
        _require_positive(self.annual_kwh, "mall.annual_kwh")
        _require_length(self.monthly_mwh, MONTHS_PER_YEAR, "mall.monthly_mwh")
        _require_length(self.hourly_shape_kw, HOURS_PER_DAY, "mall.hourly_shape_kw")
        _require(sum(self.hourly_shape_kw) > 0, "mall.hourly_shape_kw", "must not be all zero")
        _require(0 <= self.noise_relative_std < 0.5, "mall.noise_relative_std", "must be in [0, 0.5)")


@dataclass
class EVFleetConfig:
    """One kind of vehicle and the sockets reserved for it."""

    name: str = "moto"
    sockets: int = 112
    charger_kw: float = 2.0
    battery_kwh: float = 2.5
    # Share of the site's EV sessions made by this fleet (normalised across fleets).
    session_share: float = 0.87
    # Tailpipe CO2 avoided per kWh charged, net of grid emissions (reported, never rewarded).
    avoided_tailpipe_kg_per_kwh: float = 0.87

    def __post_init__(self) -> None:
        prefix = f"ev.fleets[{self.name}]"
        _require(self.sockets >= 1, f"{prefix}.sockets", f"must be >= 1, got {self.sockets}")
        _require_positive(self.charger_kw, f"{prefix}.charger_kw")
        _require_positive(self.battery_kwh, f"{prefix}.battery_kwh")
        _require_positive(self.session_share, f"{prefix}.session_share")
        _require_non_negative(self.avoided_tailpipe_kg_per_kwh, f"{prefix}.avoided_tailpipe_kg_per_kwh")


def _default_fleets() -> list[EVFleetConfig]:
    return [
        EVFleetConfig(
            name="moto",
            sockets=112,
            charger_kw=2.0,
            battery_kwh=2.5,
            session_share=0.874,
            avoided_tailpipe_kg_per_kwh=0.87,
        ),
        EVFleetConfig(
            name="mototaxi",
            sockets=16,
            charger_kw=3.0,
            battery_kwh=4.5,
            session_share=0.126,
            avoided_tailpipe_kg_per_kwh=0.47,
        ),
    ]


@dataclass
class EVConfig:
    """EV charging sessions (docs/site.md, "EV charging"). One CityLearn charger per socket."""

    fleets: list[EVFleetConfig] = field(default_factory=_default_fleets)
    open_hour: int = 9
    # Closing hour: no EV is connected from this hour on.
    close_hour: int = 22
    arrival_soc_mean: float = 0.245
    arrival_soc_std: float = 0.12
    required_soc_mean: float = 0.78
    required_soc_std: float = 0.15
    # Clip bounds for the arrival SOC draw.
    arrival_soc_min: float = 0.05
    arrival_soc_max: float = 0.90
    dwell_min_h: int = 1
    dwell_max_h: int = 4
    dwell_mean_h: float = 1.75
    # Relative arrival intensity per hour of day (0..23); zero outside opening hours.
    arrival_hourly_weights: list[float] = field(
        default_factory=lambda: [
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0.6,
            0.7,
            0.8,
            0.9,
            0.9,
            0.8,
            0.8,
            0.9,
            1.1,
            1.5,
            1.7,
            1.6,
            1.2,
            0,
            0,
        ]
    )
    # Calibration target: mean EV energy delivered per day over the year (kWh/day).
    daily_energy_kwh: float = 900.0

    def __post_init__(self) -> None:
        _require(len(self.fleets) >= 1, "ev.fleets", "needs at least one fleet")
        names = [fleet.name for fleet in self.fleets]
        _require(len(set(names)) == len(names), "ev.fleets", f"fleet names must be unique, got {names}")
        _require_hour(self.open_hour, "ev.open_hour")
        _require_hour(self.close_hour, "ev.close_hour", allow_24=True)
        _require(
            self.open_hour < self.close_hour,
            "ev.open_hour",
            f"opening hour ({self.open_hour}) must be before closing hour ({self.close_hour})",
        )
        for name in ("arrival_soc_mean", "required_soc_mean", "arrival_soc_min", "arrival_soc_max"):
            _require_fraction(getattr(self, name), f"ev.{name}")
        _require_non_negative(self.arrival_soc_std, "ev.arrival_soc_std")
        _require_non_negative(self.required_soc_std, "ev.required_soc_std")
        _require(self.arrival_soc_min <= self.arrival_soc_max, "ev.arrival_soc_min", "must be <= ev.arrival_soc_max")
        _require(
            1 <= self.dwell_min_h <= self.dwell_max_h, "ev.dwell_min_h", "must satisfy 1 <= dwell_min_h <= dwell_max_h"
        )
        _require(
            self.dwell_min_h <= self.dwell_mean_h <= self.dwell_max_h,
            "ev.dwell_mean_h",
            f"must lie in [dwell_min_h, dwell_max_h] = [{self.dwell_min_h}, {self.dwell_max_h}]",
        )
        _require(
            self.dwell_min_h <= self.close_hour - self.open_hour,
            "ev.dwell_min_h",
            "must fit within opening hours",
        )
        _require_length(self.arrival_hourly_weights, HOURS_PER_DAY, "ev.arrival_hourly_weights")
        open_weight = sum(self.arrival_hourly_weights[self.open_hour : self.close_hour])
        _require(open_weight > 0, "ev.arrival_hourly_weights", "must be positive for some opening hour")
        _require_positive(self.daily_energy_kwh, "ev.daily_energy_kwh")

    @property
    def socket_count(self) -> int:
        return sum(fleet.sockets for fleet in self.fleets)


@dataclass
class BatteryConfig:
    """The stationary battery (BESS)."""

    capacity_kwh: float = 4520.0
    power_kw: float = 2712.0
    # Round-trip AC-to-AC efficiency; the builder maps it onto CityLearn's one-way efficiency.
    round_trip_efficiency: float = 0.90
    soc_min: float = 0.20
    soc_max: float = 1.0
    initial_soc: float = 0.50

    def __post_init__(self) -> None:
        _require_positive(self.capacity_kwh, "bess.capacity_kwh")
        _require_positive(self.power_kw, "bess.power_kw")
        _require(0 < self.round_trip_efficiency <= 1, "bess.round_trip_efficiency", "must be in (0, 1]")
        _require_fraction(self.soc_min, "bess.soc_min")
        _require_fraction(self.soc_max, "bess.soc_max")
        _require_fraction(self.initial_soc, "bess.initial_soc")
        _require(self.soc_min < self.soc_max, "bess.soc_min", f"must be < bess.soc_max ({self.soc_max})")
        _require(
            self.soc_min <= self.initial_soc <= self.soc_max,
            "bess.initial_soc",
            f"must lie in [soc_min, soc_max] = [{self.soc_min}, {self.soc_max}]",
        )

    @property
    def one_way_efficiency(self) -> float:
        """Charge and discharge each lose the same share: sqrt of the round trip."""
        return math.sqrt(self.round_trip_efficiency)


@dataclass
class GridConfig:
    """Grid emissions and the energy tariff. Export earns nothing: KPIs count imports only."""

    carbon_intensity_kg_per_kwh: float = 0.4521
    peak_price_per_kwh: float = 0.45
    offpeak_price_per_kwh: float = 0.28
    # Peak window [peak_start_hour, peak_end_hour): 18:00-22:59.
    peak_start_hour: int = 18
    peak_end_hour: int = 23
    currency: str = "PEN"
    # Demand charge of the ``tariff`` objective, currency per kW-month, on the month's largest hourly import
    # inside the peak window. Default: an Osinergmin MT3 schedule (2E1P), users "presentes en punta":
    # generation 56.09 + distribution network 16.40 S//kW-month (docs/tariff.md says where it comes from).
    demand_charge_per_kw_month: float = 72.49
    # The most the site may draw from the grid in any hour (kW; None: no limit): the connection's contracted
    # capacity. Both simulators curtail the battery's charging, then the EVs' power above their guaranteed
    # minimum, to stay under it (envs/import_limit.py); the LPs and MPCs plan under it.
    import_limit_kw: float | None = None

    def __post_init__(self) -> None:
        _require_non_negative(self.carbon_intensity_kg_per_kwh, "grid.carbon_intensity_kg_per_kwh")
        if self.import_limit_kw is not None:
            _require_positive(self.import_limit_kw, "grid.import_limit_kw")
        _require(
            self.carbon_intensity_kg_per_kwh < 2.0,
            "grid.carbon_intensity_kg_per_kwh",
            "above 2 kg/kWh: wrong units (g/kWh?)",
        )
        _require_non_negative(self.peak_price_per_kwh, "grid.peak_price_per_kwh")
        _require_non_negative(self.offpeak_price_per_kwh, "grid.offpeak_price_per_kwh")
        _require_non_negative(self.demand_charge_per_kw_month, "grid.demand_charge_per_kw_month")
        _require_hour(self.peak_start_hour, "grid.peak_start_hour")
        _require_hour(self.peak_end_hour, "grid.peak_end_hour", allow_24=True)
        _require(self.peak_start_hour < self.peak_end_hour, "grid.peak_start_hour", "must be before grid.peak_end_hour")

    def price_at_hour(self, hour_of_day: int) -> float:
        in_peak = self.peak_start_hour <= hour_of_day < self.peak_end_hour
        return self.peak_price_per_kwh if in_peak else self.offpeak_price_per_kwh


@dataclass
class SiteConfig:
    """One site profile: everything the dataset builder needs, nothing about learning."""

    name: str = "iquitos-2026"
    # Seed of every random draw of the builder (cloudiness, load noise, EV sessions).
    seed: int = 2026
    location: LocationConfig = field(default_factory=LocationConfig)
    calendar: CalendarConfig = field(default_factory=CalendarConfig)
    pv: PVConfig = field(default_factory=PVConfig)
    weather: WeatherConfig = field(default_factory=WeatherConfig)
    mall: MallLoadConfig = field(default_factory=MallLoadConfig)
    ev: EVConfig = field(default_factory=EVConfig)
    bess: BatteryConfig = field(default_factory=BatteryConfig)
    grid: GridConfig = field(default_factory=GridConfig)

    def __post_init__(self) -> None:
        _require(
            bool(self.name) and all(c.isalnum() or c in "-_." for c in self.name),
            "name",
            f"must be a non-empty name of letters, digits, '-', '_' or '.', got {self.name!r}",
        )

    @property
    def hours(self) -> int:
        return self.calendar.hours

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def content_hash(self) -> str:
        """A short hash of every field: the builder's cache key (same config -> same data)."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


BASE_KEY = "base"  # a site file may inherit every section it leaves out from another site of the same folder


def load_site_config(path: str | Path) -> SiteConfig:
    """Read a site profile YAML, refusing unknown keys, wrong types, invalid values and missing sections.

    jsonargparse checks keys and types against the dataclasses (the same machinery LightningCLI
    uses); each dataclass's ``__post_init__`` then checks physics. Every failure is raised as a
    :class:`SiteConfigError` whose message names the file and the field.

    Every section of :class:`SiteConfig` must be written, unless the file names a ``base`` (another
    site's name, ``base: iquitos-2026``, or a YAML path) whose sections fill the ones it leaves out:
    a half-written or mis-indented file must not silently become the default site under a new name.
    """
    path = Path(path)
    data = _site_data(path, seen=())
    missing = [field.name for field in dataclasses.fields(SiteConfig) if field.name not in data]
    if missing:
        raise SiteConfigError(
            f"site config {path}: section {missing[0]!r} is missing" + (f" (and {', '.join(missing[1:])})" if
            missing[1:] else "") + f"; write it, or inherit what is left out with `{BASE_KEY}: iquitos-2026`"
        )  # fmt: skip
    try:
        return copy.deepcopy(_checked_site(data))
    except SiteConfigError as error:
        raise SiteConfigError(f"site config {path}: {error}") from None
    except Exception as error:  # jsonargparse reports key and type errors with various classes
        message = str(error).replace("\n", " ").strip()
        raise SiteConfigError(f"site config {path}: {message}") from None


_CHECKED_SITES: dict[str, SiteConfig] = {}  # canonical JSON of a merged site mapping -> its checked SiteConfig


def _checked_site(data: dict[str, Any]) -> SiteConfig:
    """The :class:`SiteConfig` of a site file's merged mapping, checked by jsonargparse and the dataclasses. Kept per
    process under the mapping's canonical JSON (callers copy it): a fit loads its site profile about twelve times
    (each training year, the evaluation and the selection years), ~0.15 s a parse on the 2-core machine. A failure
    is not kept, so it is raised again."""
    key = json.dumps(data, sort_keys=True, default=repr)
    if key not in _CHECKED_SITES:
        parser = ArgumentParser(exit_on_error=False)
        parser.add_class_arguments(SiteConfig, nested_key="site", fail_untyped=True)
        namespace = parser.parse_object({"site": data})
        _CHECKED_SITES[key] = parser.instantiate_classes(namespace).site
    return _CHECKED_SITES[key]


def _site_data(path: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    """The file's mapping, over its ``base``'s (recursively, section by section)."""
    if path.resolve() in seen:
        raise SiteConfigError(f"site config {path}: `{BASE_KEY}` loops back to itself")
    data = _read_site_file(path)
    base = data.pop(BASE_KEY, None)
    if base is None:
        return data
    base_path = Path(str(base)) if str(base).endswith((".yaml", ".yml")) else path.with_name(f"{base}.yaml")
    merged = _site_data(base_path, (*seen, path.resolve()))
    for key, value in data.items():
        both_sections = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = {**merged[key], **value} if both_sections else value
    return merged


def section_sources(path: str | Path) -> dict[str, str]:
    """Where each section of a site file comes from: ``"file"``, ``"base <name>"`` (left out, inherited whole)
    or ``"file over base <name>"`` (written in part, the rest inherited); read from the YAML files themselves.

    Why: a site built over a base is the base wherever the file is silent; the calibration table says which
    figures the user's file decided and which it took from the base.
    """
    path = Path(path)
    data = _read_site_file(path)
    base = data.pop(BASE_KEY, None)
    if base is None:
        return {section.name: "file" for section in dataclasses.fields(SiteConfig)}
    base_name = Path(str(base)).stem
    sources = {}
    for section in dataclasses.fields(SiteConfig):
        written = data.get(section.name)
        inner = _section_field_names(section)
        if section.name not in data:
            sources[section.name] = f"base {base_name}"
        elif isinstance(written, dict) and inner is not None and not inner <= set(written):
            sources[section.name] = f"file over base {base_name}"
        else:
            sources[section.name] = "file"
    return sources


def _section_field_names(field: dataclasses.Field) -> set[str] | None:
    """The keys of a section (a dataclass field of :class:`SiteConfig`), None for a plain value."""
    if field.default_factory is dataclasses.MISSING:
        return None
    default = field.default_factory()
    return {inner.name for inner in dataclasses.fields(default)} if dataclasses.is_dataclass(default) else None


def _read_site_file(path: Path) -> dict[str, Any]:
    """One site file's own mapping (its ``base`` key included, not followed)."""
    if not path.is_file():
        raise SiteConfigError(f"site config {path}: file not found")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise SiteConfigError(f"site config {path}: not valid YAML ({str(error).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise SiteConfigError(f"site config {path}: expected a mapping of sections, got {type(data).__name__}")
    return data


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())
