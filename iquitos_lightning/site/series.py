"""The site's hourly series in memory: what the builder generates and everyone downstream reads.

Why a separate contract: the CityLearn files, the perfect-foresight LP and the tests all need the
same numbers (PV, mall load, EV sessions, prices). The builder produces one :class:`SiteSeries`,
writes it to CityLearn's schema and CSVs, and can read it back from them, so the LP and the
environment can never disagree about the data.

Conventions (hold them everywhere):
- step ``t`` is the hour [t, t+1) from 1 January 00:00 local time; powers are the hour's mean kW,
  so a power equals the hour's energy in kWh;
- an EV session occupies its socket on steps ``arrival_step <= t < departure_step`` and
  leaves at the start of ``departure_step``; its SOC values are fractions of its battery.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from iquitos_lightning.site.config import SiteConfig

SESSION_COLUMNS = (
    "socket",  # index into the site's sockets, 0..S-1 (fleets in config order)
    "arrival_step",
    "departure_step",  # exclusive
    "arrival_soc",
    "required_soc",
)


def plugged_steps(arrival: np.ndarray, departure: np.ndarray, hours: int) -> tuple[np.ndarray, np.ndarray]:
    """Every step a session occupies its socket (``arrival <= t < min(departure, hours)``), session after session:
    ``(session, step)``, two int64 arrays of one entry per such step. Why one expansion for every table that
    writes sessions hour by hour (the CityLearn charger files, the twin's tables): a Python loop over the ~230,000
    sessions of a year took seconds."""
    arrival = np.asarray(arrival, dtype=np.int64)
    plugged_hours = np.clip(np.minimum(np.asarray(departure, dtype=np.int64), hours) - arrival, 0, None)
    session = np.repeat(np.arange(len(arrival)), plugged_hours)
    first_entry = np.repeat(np.cumsum(plugged_hours) - plugged_hours, plugged_hours)
    return session, arrival[session] + np.arange(len(session)) - first_entry


@dataclass
class SiteSeries:
    """Every hourly series of one site build (length ``config.hours``) plus the EV sessions."""

    config: SiteConfig
    pv_kw: np.ndarray  # AC output of the whole plant, after clipping
    mall_kw: np.ndarray  # non-shiftable load
    price_per_kwh: np.ndarray  # import tariff
    carbon_intensity_kg_per_kwh: np.ndarray
    temperature_c: np.ndarray
    humidity_pct: np.ndarray
    ghi_w_m2: np.ndarray
    dni_w_m2: np.ndarray
    dhi_w_m2: np.ndarray
    sessions: pd.DataFrame  # columns SESSION_COLUMNS, one row per EV visit

    @property
    def hours(self) -> int:
        return len(self.pv_kw)

    @property
    def socket_charger_kw(self) -> np.ndarray:
        return np.concatenate([[f.charger_kw] * f.sockets for f in self.config.ev.fleets]).astype(float)

    @property
    def socket_battery_kwh(self) -> np.ndarray:
        return np.concatenate([[f.battery_kwh] * f.sockets for f in self.config.ev.fleets]).astype(float)

    @property
    def socket_fleet(self) -> list[str]:
        return [f.name for f in self.config.ev.fleets for _ in range(f.sockets)]

    def session_energy_needed_kwh(self) -> np.ndarray:
        """Energy each session needs to reach its required SOC (battery side), per row."""
        battery = self.socket_battery_kwh[self.sessions["socket"].to_numpy()]
        gap = (self.sessions["required_soc"] - self.sessions["arrival_soc"]).clip(lower=0).to_numpy()
        return gap * battery
