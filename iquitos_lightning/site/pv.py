"""Hourly weather and PV AC output of the site, from pvlib physics and a seeded cloudiness process.

Why generated: no network at build time, so the builder cannot fetch a TMY. It takes pvlib's
Ineichen clear sky (with the Linke turbidity climatology pvlib ships) and multiplies it by an
AR(1) clear-sky index whose monthly means are calibrated so that (a) the year's GHI equals
``pv.annual_ghi_kwh_m2`` and (b) the monthly PV energy follows ``pv.monthly_shape_mwh`` as a shape.
The rest is a standard chain: Erbs decomposition, Hay-Davies transposition to the plane of array,
SAPM cell temperature, PVWatts DC with the config's temperature coefficient and system losses,
a flat inverter efficiency and clipping at the AC limit.

The whole year is always simulated and then cut to ``calendar.hours``: a short calendar (the tiny
site) is exactly the first days of the full year, with the full year's per-month calibration.
Values are hourly means: sun positions are taken at mid-hour.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pandas as pd

from iquitos_lightning.site.config import HOURS_PER_DAY, SiteConfig

YEAR_DAYS = 365
# Spread of the AR(1) clear-sky index around its monthly mean (before clipping).
CLOUDINESS_STD = 0.32
# Bounds of the clear-sky index: heavy overcast still lets a little light through; no over-irradiance.
CLEARSKY_INDEX_MIN = 0.03
CLEARSKY_INDEX_MAX = 1.0
ALBEDO = 0.2
# Noise of the weather "forecasts" (1/2/3 steps ahead), relative to the value.
FORECAST_RELATIVE_NOISE = (0.02, 0.04, 0.06)
CALIBRATION_ROUNDS = 4


@dataclass
class PVResult:
    """Hourly series of one calendar (length ``config.hours``) and the full-year calibration figures."""

    times: pd.DatetimeIndex  # start of each hour, local fixed-offset time
    ghi_w_m2: np.ndarray
    dni_w_m2: np.ndarray
    dhi_w_m2: np.ndarray
    poa_w_m2: np.ndarray
    temperature_c: np.ndarray
    humidity_pct: np.ndarray
    pv_kw: np.ndarray  # plant AC output after clipping
    calibration: dict[str, float]


def local_times(config: SiteConfig, hours: int) -> pd.DatetimeIndex:
    """Start of each hourly step from 1 January 00:00 in the site's fixed UTC offset (no DST)."""
    zone = dt.timezone(dt.timedelta(hours=config.location.utc_offset_hours))
    return pd.date_range(dt.datetime(config.calendar.year, 1, 1, tzinfo=zone), periods=hours, freq="h")


def weather_series(config: SiteConfig, times: pd.DatetimeIndex, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Air temperature (daily sine, coolest at 06 h, warmest at 15 h, plus AR noise) and humidity (anti-correlated)."""
    weather = config.weather
    hour = times.hour.to_numpy() + 0.5
    # Asymmetric day: rise from 06 to 15 h (9 h), fall over the other 15 h.
    rising = (hour >= 6) & (hour < 15)
    phase = np.where(rising, (hour - 6) / 9 * np.pi, np.pi + ((hour - 15) % 24) / 15 * np.pi)
    daily = -np.cos(phase) * weather.temperature_daily_swing_c / 2
    noise = _ar1(rng, len(times), 0.9) * 0.6
    temperature = weather.temperature_mean_c + daily + noise
    low = weather.temperature_mean_c - weather.temperature_daily_swing_c / 2
    span = max(weather.temperature_daily_swing_c, 1e-9)
    warmth = np.clip((temperature - low) / span, 0.0, 1.0)
    humidity = weather.humidity_max_pct - (weather.humidity_max_pct - weather.humidity_min_pct) * warmth
    return temperature, humidity


def simulate_pv(config: SiteConfig) -> PVResult:
    """Weather and PV of ``config`` (module docstring); deterministic for ``config.seed``."""
    pv = config.pv
    year_hours = YEAR_DAYS * HOURS_PER_DAY
    times = local_times(config, year_hours)
    mid_times = times + pd.Timedelta(minutes=30)
    import pvlib  # lazy: only building a site needs pvlib; a built site (and training) runs without it

    location = pvlib.location.Location(
        config.location.latitude,
        config.location.longitude,
        tz=config.location.utc_offset_hours,
        altitude=config.location.altitude_m,
    )
    solar_position = location.get_solarposition(mid_times)
    clearsky = location.get_clearsky(mid_times, model="ineichen", solar_position=solar_position)
    clear_ghi = clearsky["ghi"].to_numpy()
    dni_extra = pvlib.irradiance.get_extra_radiation(mid_times).to_numpy()
    zenith = solar_position["apparent_zenith"].to_numpy()
    azimuth = solar_position["azimuth"].to_numpy()

    rng = np.random.default_rng(config.seed)
    temperature, humidity = weather_series(config, times, rng)
    cloud_noise = _ar1(rng, year_hours, pv.cloudiness_persistence)
    month = times.month.to_numpy() - 1

    shape = np.asarray(pv.monthly_shape_mwh, dtype=float)
    shape_share = shape / shape.sum()
    target_ghi_wh = pv.annual_ghi_kwh_m2 * 1000 * shape_share  # first guess: GHI follows the PV shape
    for _ in range(CALIBRATION_ROUNDS):
        index = _clearsky_index(clear_ghi, cloud_noise, month, target_ghi_wh)
        chain = _pv_chain(config, clear_ghi * index, zenith, azimuth, dni_extra, mid_times, temperature)
        pv_share = np.bincount(month, weights=chain["ac_kw"], minlength=12)
        pv_share = pv_share / pv_share.sum()
        # Months that produce too much PV for their GHI get less GHI, then the year is renormalised.
        target_ghi_wh = target_ghi_wh * shape_share / np.maximum(pv_share, 1e-12)
        target_ghi_wh *= pv.annual_ghi_kwh_m2 * 1000 / target_ghi_wh.sum()
    index = _clearsky_index(clear_ghi, cloud_noise, month, target_ghi_wh)
    chain = _pv_chain(config, clear_ghi * index, zenith, azimuth, dni_extra, mid_times, temperature)

    annual_ac = float(chain["ac_kw"].sum())
    annual_poa = float(chain["poa"].sum()) / 1000
    monthly_ac = np.bincount(month, weights=chain["ac_kw"], minlength=12)
    calibration = {
        "annual_ghi_kwh_m2": float(chain["ghi"].sum()) / 1000,
        "annual_poa_kwh_m2": annual_poa,
        "specific_yield_kwh_kwp": annual_ac / pv.dc_kwp,
        "performance_ratio": annual_ac / pv.dc_kwp / annual_poa,
        "annual_pv_kwh": annual_ac,
        "mean_clearsky_index": float(chain["ghi"].sum() / clear_ghi.sum()),
        "clipped_hours": int((chain["ac_kw"] >= pv.ac_limit_kw - 1e-9).sum()),
        "monthly_shape_max_error": float(np.abs(monthly_ac / monthly_ac.sum() - shape_share).max() / shape_share.max()),
    }
    hours = config.hours
    return PVResult(
        times=times[:hours],
        ghi_w_m2=chain["ghi"][:hours],
        dni_w_m2=chain["dni"][:hours],
        dhi_w_m2=chain["dhi"][:hours],
        poa_w_m2=chain["poa"][:hours],
        temperature_c=temperature[:hours],
        humidity_pct=humidity[:hours],
        pv_kw=chain["ac_kw"][:hours],
        calibration=calibration,
    )


def forecasts(values: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """1/2/3-step-ahead forecasts: the true future value times seeded noise growing with the horizon.

    The last steps of the series repeat the final value (there is no future beyond the episode).
    """
    result = []
    for steps, relative_noise in enumerate(FORECAST_RELATIVE_NOISE, start=1):
        future = np.concatenate([values[steps:], np.repeat(values[-1:], steps)])
        noisy = future * (1 + relative_noise * rng.standard_normal(len(values)))
        result.append(np.where(future >= 0, np.maximum(noisy, 0), noisy))
    return result


def _ar1(rng: np.random.Generator, length: int, persistence: float) -> np.ndarray:
    """A stationary AR(1) series of unit variance: x[t] = phi x[t-1] + sqrt(1 - phi^2) e[t]."""
    innovations = rng.standard_normal(length) * np.sqrt(1 - persistence**2)
    series = np.empty(length)
    series[0] = rng.standard_normal()
    for t in range(1, length):
        series[t] = persistence * series[t - 1] + innovations[t]
    return series


def _clearsky_index(
    clear_ghi: np.ndarray, cloud_noise: np.ndarray, month: np.ndarray, target_ghi_wh: np.ndarray
) -> np.ndarray:
    """Clip(mean_m + std * noise) with each month's mean found by bisection so the month's GHI hits its target."""
    low = np.full(12, -1.0)
    high = np.full(12, 2.0)
    for _ in range(50):
        mid = (low + high) / 2
        index = np.clip(mid[month] + CLOUDINESS_STD * cloud_noise, CLEARSKY_INDEX_MIN, CLEARSKY_INDEX_MAX)
        ghi = np.bincount(month, weights=clear_ghi * index, minlength=12)
        too_bright = ghi > target_ghi_wh
        high = np.where(too_bright, mid, high)
        low = np.where(too_bright, low, mid)
    mean = (low + high) / 2
    return np.clip(mean[month] + CLOUDINESS_STD * cloud_noise, CLEARSKY_INDEX_MIN, CLEARSKY_INDEX_MAX)


def _pv_chain(
    config: SiteConfig,
    ghi: np.ndarray,
    zenith: np.ndarray,
    azimuth: np.ndarray,
    dni_extra: np.ndarray,
    mid_times: pd.DatetimeIndex,
    temperature: np.ndarray,
) -> dict[str, np.ndarray]:
    """GHI -> DNI/DHI (Erbs) -> plane of array (Hay-Davies) -> cell temperature (SAPM) -> AC kW (PVWatts)."""
    pv = config.pv
    import pvlib  # lazy: only building a site needs pvlib; a built site (and training) runs without it

    decomposition = pvlib.irradiance.erbs(ghi, zenith, mid_times.dayofyear.to_numpy())
    dni = np.nan_to_num(np.asarray(decomposition["dni"], dtype=float))
    dhi = np.nan_to_num(np.asarray(decomposition["dhi"], dtype=float))
    dni = np.where(zenith < 90, dni, 0.0)
    dhi = np.where(zenith < 90, np.minimum(dhi, ghi), 0.0)
    ghi = np.where(zenith < 90, ghi, 0.0)
    poa = pvlib.irradiance.get_total_irradiance(
        surface_tilt=pv.tilt_deg,
        surface_azimuth=pv.azimuth_deg,
        solar_zenith=zenith,
        solar_azimuth=azimuth,
        dni=dni,
        ghi=ghi,
        dhi=dhi,
        dni_extra=dni_extra,
        albedo=ALBEDO,
        model="haydavies",
    )
    poa_global = np.clip(np.nan_to_num(np.asarray(poa["poa_global"], dtype=float)), 0.0, None)
    sapm = pvlib.temperature.TEMPERATURE_MODEL_PARAMETERS["sapm"]["open_rack_glass_polymer"]
    cell_temperature = pvlib.temperature.sapm_cell(poa_global, temperature, config.weather.wind_speed_m_s, **sapm)
    dc_kw = pvlib.pvsystem.pvwatts_dc(poa_global, cell_temperature, pv.dc_kwp, pv.temperature_coefficient_per_c)
    dc_kw = np.asarray(dc_kw, dtype=float) * (1 - pv.system_losses)
    ac_kw = np.clip(dc_kw * pv.inverter_efficiency, 0.0, pv.ac_limit_kw)
    return {"ghi": ghi, "dni": dni, "dhi": dhi, "poa": poa_global, "ac_kw": ac_kw}
