"""The site's demand: the mall's hourly load and the EV charging sessions, seeded and calibrated.

Why calibrated rather than sampled freely: the sizing figures of docs/site.md (12.37 GWh/yr of mall
load, about 900 kWh/day of EV energy) are what the controllers are compared on, so the builder
scales its random draws until they are met, and reports how close it got.

- Mall: the typical daily shape is scaled month by month (each month gets its share of
  ``annual_kwh`` per day), then multiplied by seeded AR(1) noise that is renormalised per month so
  it moves energy between hours but never changes a month's total.
- EVs: Poisson arrivals per opening hour with the configured daily shape, a fleet drawn by
  ``session_share``, SOC draws clipped as docs/site.md says, integer dwell 1-4 h (truncated geometric with
  the configured mean) cut at closing time, and each arrival put on a random free socket of its
  fleet (dropped and counted if none is free). The daily arrival rate is solved (secant steps on
  the same seed) so that the energy the sessions can actually take, min(need, charger kW x dwell),
  averages ``ev.daily_energy_kwh``.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass

import numpy as np
import pandas as pd

from iquitos_lightning.site.config import HOURS_PER_DAY, EVConfig, SiteConfig
from iquitos_lightning.site.series import SESSION_COLUMNS

MALL_NOISE_PERSISTENCE = 0.6
DAYS_PER_MONTH = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
# Decimals kept for SOC values (CityLearn stores float32; 4 decimals round-trip within 1e-7).
SOC_DECIMALS = 4
EV_CALIBRATION_ROUNDS = 12
EV_CALIBRATION_TOLERANCE = 0.002


@dataclass
class EVSessions:
    """The accepted sessions and what the calibration found."""

    sessions: pd.DataFrame  # SESSION_COLUMNS, sorted by arrival then socket
    arrivals_per_day: float  # the solved Poisson rate (all fleets)
    dropped: int  # arrivals that found no free socket of their fleet
    expected_energy_kwh_per_day: float  # sum over sessions of min(need, charger kW x dwell) / days


def mall_load(config: SiteConfig, month_of_step: np.ndarray, hour_of_step: np.ndarray) -> np.ndarray:
    """Mall load (kW) per step: monthly-scaled daily shape times month-preserving AR(1) noise."""
    mall = config.mall
    shape = np.asarray(mall.hourly_shape_kw, dtype=float)
    monthly = np.asarray(mall.monthly_mwh, dtype=float)
    month_kwh = mall.annual_kwh * monthly / monthly.sum()
    day_kwh = month_kwh / DAYS_PER_MONTH
    base = shape[hour_of_step] * (day_kwh / shape.sum())[month_of_step]

    rng = np.random.default_rng([config.seed, 1])
    noise = np.empty(len(base))
    innovations = rng.standard_normal(len(base)) * np.sqrt(1 - MALL_NOISE_PERSISTENCE**2)
    noise[0] = rng.standard_normal()
    for t in range(1, len(base)):
        noise[t] = MALL_NOISE_PERSISTENCE * noise[t - 1] + innovations[t]
    load = base * np.clip(1 + mall.noise_relative_std * noise, 0.5, 1.5)
    # Mean-preserving: each month (as simulated) keeps exactly the energy of the noiseless shape.
    wanted = np.bincount(month_of_step, weights=base, minlength=12)
    got = np.bincount(month_of_step, weights=load, minlength=12)
    return load * np.divide(wanted, got, out=np.ones(12), where=got > 0)[month_of_step]


def dwell_probabilities(config: SiteConfig) -> tuple[np.ndarray, np.ndarray]:
    """Integer dwell hours and their probabilities: truncated geometric p_k ~ r^k with the configured mean."""
    ev = config.ev
    hours = np.arange(ev.dwell_min_h, ev.dwell_max_h + 1)
    if len(hours) == 1:
        return hours, np.ones(1)
    low, high = 1e-6, 1e6
    for _ in range(200):
        ratio = np.sqrt(low * high)
        weights = ratio ** (hours - hours[0])
        mean = float((hours * weights).sum() / weights.sum())
        if mean > ev.dwell_mean_h:
            high = ratio
        else:
            low = ratio
    weights = ratio ** (hours - hours[0])
    return hours, weights / weights.sum()


def ev_sessions(config: SiteConfig) -> EVSessions:
    """Sessions of the whole calendar with the arrival rate calibrated to ``ev.daily_energy_kwh``."""
    ev = config.ev
    charger_kw = np.array([fleet.charger_kw for fleet in ev.fleets])
    battery_kwh = np.array([fleet.battery_kwh for fleet in ev.fleets])
    share = np.array([fleet.session_share for fleet in ev.fleets])
    share = share / share.sum()
    mean_session_kwh = float(
        share @ np.minimum((ev.required_soc_mean - ev.arrival_soc_mean) * battery_kwh, charger_kw * ev.dwell_mean_h)
    )
    rate = ev.daily_energy_kwh / max(mean_session_kwh, 1e-9)
    result = _draw_sessions(config, rate)
    for _ in range(EV_CALIBRATION_ROUNDS):
        error = result.expected_energy_kwh_per_day / ev.daily_energy_kwh - 1
        if abs(error) < EV_CALIBRATION_TOLERANCE or result.expected_energy_kwh_per_day <= 0:
            break
        rate = rate / (1 + error)
        result = _draw_sessions(config, rate)
    return result


def _draw_sessions(config: SiteConfig, arrivals_per_day: float) -> EVSessions:
    """One seeded draw of all sessions at a given daily arrival rate (same seed for every rate)."""
    ev = config.ev
    days = config.calendar.days
    rng = np.random.default_rng([config.seed, 2])
    weights = np.asarray(ev.arrival_hourly_weights, dtype=float)
    weights[: ev.open_hour] = 0
    weights[ev.close_hour :] = 0
    hourly_rate = arrivals_per_day * weights / weights.sum()
    counts = rng.poisson(np.tile(hourly_rate, days))
    arrival_step = np.repeat(np.arange(days * HOURS_PER_DAY), counts)
    total = len(arrival_step)

    share = np.array([fleet.session_share for fleet in ev.fleets], dtype=float)
    fleet_of = rng.choice(len(ev.fleets), size=total, p=share / share.sum())
    arrival_soc = np.clip(
        rng.normal(ev.arrival_soc_mean, ev.arrival_soc_std, total), ev.arrival_soc_min, ev.arrival_soc_max
    ).round(SOC_DECIMALS)
    required_soc = np.clip(rng.normal(ev.required_soc_mean, ev.required_soc_std, total), arrival_soc, 1.0).round(
        SOC_DECIMALS
    )
    dwell_hours, dwell_p = dwell_probabilities(config)
    dwell = rng.choice(dwell_hours, size=total, p=dwell_p)
    closing_step = (arrival_step // HOURS_PER_DAY) * HOURS_PER_DAY + ev.close_hour
    departure_step = np.minimum(arrival_step + dwell, closing_step)
    tie_break = rng.random(total)

    socket = np.array(first_free_sockets(ev, fleet_of, arrival_step, departure_step, tie_break), dtype=np.int64)

    kept = socket >= 0
    sessions = pd.DataFrame(
        {
            "socket": socket[kept],
            "arrival_step": arrival_step[kept],
            "departure_step": departure_step[kept],
            "arrival_soc": arrival_soc[kept],
            "required_soc": required_soc[kept],
        }
    )
    sessions = sessions.sort_values(["arrival_step", "socket"], kind="stable").reset_index(drop=True)
    charger_kw = np.array([fleet.charger_kw for fleet in ev.fleets])[fleet_of[kept]]
    battery_kwh = np.array([fleet.battery_kwh for fleet in ev.fleets])[fleet_of[kept]]
    need = (required_soc[kept] - arrival_soc[kept]) * battery_kwh
    deliverable = np.minimum(need, charger_kw * (departure_step[kept] - arrival_step[kept]))
    return EVSessions(
        sessions=sessions[list(SESSION_COLUMNS)],
        arrivals_per_day=float(arrivals_per_day),
        dropped=int((~kept).sum()),
        expected_energy_kwh_per_day=float(deliverable.sum() / days),
    )


def first_free_sockets(
    ev: EVConfig, fleet_of: np.ndarray, arrival_step: np.ndarray, departure_step: np.ndarray, tie_break: np.ndarray
) -> list[int]:
    """The socket each arrival in order takes among its fleet's sockets free at its arrival step (the one at
    ``tie_break`` along them, in socket order), or -1 when all are taken.

    Why not a scan of every socket per arrival: ~230,000 arrivals a year over fleets of up to 128 sockets cost ~4 s of
    a site's build that way. Arrivals come in time order, so a socket taken until step d is free for every arrival
    from d on: each fleet keeps its free sockets sorted and its taken ones in a heap by the step they free up, and
    each arrival first frees those whose step has come. The choices are the same integers as the scan's."""
    if np.any(np.diff(arrival_step) < 0):
        raise ValueError("arrivals must come in time order")
    first_socket = [0, *np.cumsum([fleet.sockets for fleet in ev.fleets])[:-1].tolist()]
    free = [list(range(fleet.sockets)) for fleet in ev.fleets]
    taken: list[list[tuple[int, int]]] = [[] for _ in ev.fleets]  # (free from step, socket) heaps
    sockets = []
    for fleet, arrival, departure, tie in zip(
        fleet_of.tolist(), arrival_step.tolist(), departure_step.tolist(), tie_break.tolist(), strict=True
    ):
        fleet_free, fleet_taken = free[fleet], taken[fleet]
        while fleet_taken and fleet_taken[0][0] <= arrival:
            bisect.insort(fleet_free, heapq.heappop(fleet_taken)[1])
        if not fleet_free:
            sockets.append(-1)
            continue
        chosen = fleet_free.pop(int(tie * len(fleet_free)))
        heapq.heappush(fleet_taken, (departure, chosen))
        sockets.append(first_socket[fleet] + chosen)
    return sockets
