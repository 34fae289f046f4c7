"""Hand-made sites for the control tests: small enough to solve by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd

from iquitos_lightning.site.config import BatteryConfig, EVConfig, EVFleetConfig, GridConfig, SiteConfig
from iquitos_lightning.site.series import SESSION_COLUMNS, SiteSeries


def hand_site_config(
    *,
    sockets: int = 1,
    charger_kw: float = 2.0,
    battery_kwh: float = 4.0,
    bess_capacity_kwh: float = 10.0,
    bess_power_kw: float = 10.0,
    round_trip_efficiency: float = 0.81,
    soc_min: float = 0.0,
    initial_soc: float = 0.0,
) -> SiteConfig:
    """A one-fleet site whose BESS loses exactly 10 % each way (eta = 0.9 at 0.81 round trip)."""
    fleet = EVFleetConfig(name="moto", sockets=sockets, charger_kw=charger_kw, battery_kwh=battery_kwh)
    return SiteConfig(
        name="hand",
        ev=EVConfig(fleets=[fleet]),
        bess=BatteryConfig(
            capacity_kwh=bess_capacity_kwh,
            power_kw=bess_power_kw,
            round_trip_efficiency=round_trip_efficiency,
            soc_min=soc_min,
            soc_max=1.0,
            initial_soc=initial_soc,
        ),
        grid=GridConfig(carbon_intensity_kg_per_kwh=0.5),
    )


def hand_series(
    config: SiteConfig,
    *,
    pv_kw: list[float],
    mall_kw: list[float],
    price_per_kwh: list[float],
    sessions: list[tuple[int, int, int, float, float]],
) -> SiteSeries:
    """A SiteSeries from explicit hourly values; sessions as (socket, arrival, departure, arrival_soc, required_soc)."""
    hours = len(pv_kw)
    zeros = np.zeros(hours)
    return SiteSeries(
        config=config,
        pv_kw=np.asarray(pv_kw, dtype=float),
        mall_kw=np.asarray(mall_kw, dtype=float),
        price_per_kwh=np.asarray(price_per_kwh, dtype=float),
        carbon_intensity_kg_per_kwh=np.full(hours, config.grid.carbon_intensity_kg_per_kwh),
        temperature_c=zeros,
        humidity_pct=zeros,
        ghi_w_m2=zeros,
        dni_w_m2=zeros,
        dhi_w_m2=zeros,
        sessions=pd.DataFrame(sessions, columns=list(SESSION_COLUMNS)),
    )
