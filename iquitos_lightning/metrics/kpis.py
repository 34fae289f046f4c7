"""The KPIs of one simulated episode, computed from its energy flows (docs/site.md, "Control problem").

Why one module: every controller (uncontrolled, rule-based, LP replay, learned agents) is judged
by the same function reading the same two tables the environment records
(:data:`~iquitos_lightning.envs.state.FLOW_COLUMNS` and
:data:`~iquitos_lightning.envs.state.DEPARTURE_COLUMNS`), so no controller can be flattered by
its own bookkeeping. Powers are hourly means, so a kW value is that hour's kWh.

Definitions (the table headers and the docs quote these):
- ``grid_import_kwh``: sum of hourly imports. ``co2_kg``: imports x hourly carbon intensity.
  ``cost``: imports x hourly price (export earns nothing, so it never lowers cost or CO2).
- ``peak_import_kw``: the largest hourly import.
- ``pv_self_consumption_pct``: PV used on site / PV generated, where the PV used on site in an hour
  is the generation minus what left the site (export or curtailment), never below zero.
- ``ev_energy_served_kwh``: battery-side energy delivered to EVs that departed;
  ``ev_unmet_kwh``: battery-side energy still missing to their required SOC at departure.
- ``departures_below_required``: departures whose SOC is below the required SOC by more than
  :data:`DEPARTURE_SOC_TOLERANCE` (1e-3 of the battery, so float rounding is not a miss).
- ``bess_equivalent_full_cycles``: energy discharged by the BESS (grid side) / usable capacity
  (capacity x (soc_max - soc_min)): one cycle is emptying the usable window once.
- ``avoided_tailpipe_co2_kg``: EV energy served per fleet x that fleet's net avoided tailpipe
  factor. Reported apart; it is never part of any reward.
- ``energy_balance_max_error_kw``: the largest hourly residual of
  PV + import + BESS discharge - (mall + EV + BESS charge + export); about zero when the
  simulator's flows close.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from iquitos_lightning.metrics.flows import DEPARTURE_COLUMNS, FLOW_COLUMNS
from iquitos_lightning.site.config import SiteConfig

# A departure counts as "below required" only if it misses by more than this SOC fraction.
DEPARTURE_SOC_TOLERANCE = 1e-3

# Every KPI name in table order, with its unit (the report's column headers).
KPI_UNITS: dict[str, str] = {
    "grid_import_kwh": "kWh",
    "co2_kg": "kg",
    "cost": "currency",
    "peak_import_kw": "kW",
    "pv_generation_kwh": "kWh",
    "pv_self_consumption_pct": "%",
    "grid_export_kwh": "kWh",
    "ev_energy_served_kwh": "kWh",
    "ev_unmet_kwh": "kWh",
    "ev_departures": "count",
    "departures_below_required": "count",
    "bess_equivalent_full_cycles": "cycles",
    "avoided_tailpipe_co2_kg": "kg",
    "energy_balance_max_error_kw": "kW",
}


def energy_balance_residual_kw(flows: pd.DataFrame) -> np.ndarray:
    """Hourly residual of the site balance: sources minus sinks (kW); zero when the flows close."""
    sources = flows["pv_kw"] + flows["grid_import_kw"] + flows["bess_discharge_kw"]
    sinks = flows["mall_kw"] + flows["ev_kw"] + flows["bess_charge_kw"] + flows["grid_export_kw"]
    return (sources - sinks).to_numpy(dtype=float)


def socket_fleet_index(site_config: SiteConfig) -> np.ndarray:
    """Fleet index of every socket (sockets are numbered fleet after fleet, in config order)."""
    return np.concatenate([[index] * fleet.sockets for index, fleet in enumerate(site_config.ev.fleets)]).astype(int)


def compute_kpis(flows: pd.DataFrame, departures: pd.DataFrame, site_config: SiteConfig) -> dict[str, float]:
    """Every KPI of docs/site.md for one episode (definitions in the module docstring)."""
    _require_columns(flows, FLOW_COLUMNS, "flows")
    _require_columns(departures, DEPARTURE_COLUMNS, "departures")

    imports = flows["grid_import_kw"].to_numpy(dtype=float)
    pv = flows["pv_kw"].to_numpy(dtype=float)
    exports = flows["grid_export_kw"].to_numpy(dtype=float)
    pv_generation = float(pv.sum())
    pv_used_on_site = float(np.clip(pv - exports, 0.0, None).sum())

    bess = site_config.bess
    usable_capacity_kwh = bess.capacity_kwh * (bess.soc_max - bess.soc_min)

    delivered = departures["energy_delivered_kwh"].to_numpy(dtype=float)
    fleet_of_departure = socket_fleet_index(site_config)[departures["socket"].to_numpy(dtype=int)]
    tailpipe_factor = np.array([fleet.avoided_tailpipe_kg_per_kwh for fleet in site_config.ev.fleets])
    missed = departures["departure_soc"] < departures["required_soc"] - DEPARTURE_SOC_TOLERANCE

    residual = energy_balance_residual_kw(flows)
    return {
        "grid_import_kwh": float(imports.sum()),
        "co2_kg": float((imports * flows["carbon_intensity_kg_per_kwh"].to_numpy(dtype=float)).sum()),
        "cost": float((imports * flows["price_per_kwh"].to_numpy(dtype=float)).sum()),
        "peak_import_kw": float(imports.max(initial=0.0)),
        "pv_generation_kwh": pv_generation,
        "pv_self_consumption_pct": 100.0 * pv_used_on_site / pv_generation if pv_generation > 0 else 0.0,
        "grid_export_kwh": float(exports.sum()),
        "ev_energy_served_kwh": float(delivered.sum()),
        "ev_unmet_kwh": float(departures["unmet_kwh"].to_numpy(dtype=float).sum()),
        "ev_departures": float(len(departures)),
        "departures_below_required": float(missed.sum()),
        "bess_equivalent_full_cycles": float(flows["bess_discharge_kw"].sum()) / usable_capacity_kwh,
        "avoided_tailpipe_co2_kg": float((delivered * tailpipe_factor[fleet_of_departure]).sum()),
        "energy_balance_max_error_kw": float(np.abs(residual).max(initial=0.0)),
    }


def _require_columns(table: pd.DataFrame, columns: tuple[str, ...], name: str) -> None:
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise ValueError(f"{name} table lacks columns {missing}; expected {list(columns)}")
