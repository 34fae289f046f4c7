"""What the site environment exposes besides observations: physical state and energy flows.

Why: reference controllers (rule-based, LP replay) act on physical quantities, not on normalised
observations, and the KPIs must be computed from the energy flows the simulator actually ran,
the same way for every controller and agent. These two records are that contract.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Columns of the hourly energy-flow table of an episode (one row per simulated hour, kW = kWh/h).
FLOW_COLUMNS = (
    "pv_kw",  # PV AC generation available
    "mall_kw",  # non-shiftable mall load served
    "ev_kw",  # energy into the chargers (grid side) this hour
    "bess_charge_kw",  # energy drawn by the BESS (grid side, >= 0)
    "bess_discharge_kw",  # energy delivered by the BESS (grid side, >= 0)
    "grid_import_kw",  # >= 0
    "grid_export_kw",  # >= 0 (earns nothing; PV curtailment/export)
    "bess_soc",  # BESS state of charge at the END of the hour, fraction of capacity
    "price_per_kwh",
    "carbon_intensity_kg_per_kwh",
)

# Columns of the per-departure table of an episode (one row per EV that left).
DEPARTURE_COLUMNS = (
    "socket",
    "departure_step",  # the step at whose start the EV left
    "required_soc",
    "departure_soc",
    "energy_delivered_kwh",  # battery-side energy charged during the visit
    "unmet_kwh",  # battery-side energy still missing to required_soc (>= 0)
)


@dataclass
class SiteState:
    """The physical state at the start of step ``time_step`` (before the action is applied)."""

    time_step: int
    hour_of_day: int
    bess_soc: float  # fraction of capacity
    pv_kw: float  # this hour's PV (known to the controller, as in CityLearn's observations)
    mall_kw: float
    price_per_kwh: float
    socket_connected: np.ndarray  # bool [S]
    socket_soc: np.ndarray  # [S], 0 where nothing is connected
    socket_required_soc: np.ndarray  # [S], 0 where nothing is connected
    socket_hours_to_departure: np.ndarray  # [S] int, 0 where nothing is connected
    peak_to_date_kw: float = 0.0  # largest import in the peak window so far this month (the demand charge's base)
