"""KPIs against values computed by hand on small flow tables."""

from __future__ import annotations

import pandas as pd
import pytest
from control_testkit import hand_series, hand_site_config

from iquitos_lightning.envs.actions import unavoidable_unmet_kwh
from iquitos_lightning.metrics.flows import DEPARTURE_COLUMNS, FLOW_COLUMNS
from iquitos_lightning.metrics.kpis import (
    DEPARTURE_SOC_TOLERANCE,
    KPI_UNITS,
    compute_kpis,
    energy_balance_residual_kw,
)
from iquitos_lightning.site.config import EVConfig, EVFleetConfig


def _flows() -> pd.DataFrame:
    """Three hours that close: night import, PV surplus split BESS/export, evening BESS discharge."""
    rows = [
        # pv, mall, ev, bess_chg, bess_dis, import, export, soc, price, intensity
        (0.0, 10.0, 2.0, 0.0, 0.0, 12.0, 0.0, 0.5, 0.28, 0.4521),
        (30.0, 10.0, 4.0, 10.0, 0.0, 0.0, 6.0, 0.7, 0.28, 0.4521),
        (5.0, 10.0, 3.0, 0.0, 4.0, 4.0, 0.0, 0.6, 0.45, 0.4521),
    ]
    return pd.DataFrame(rows, columns=list(FLOW_COLUMNS))


def _departures() -> pd.DataFrame:
    rows = [
        # socket, step, required, departure soc, delivered, unmet
        (0, 2, 0.8, 0.8, 1.5, 0.0),
        (1, 3, 0.9, 0.7, 2.0, 0.9),  # misses by 0.2 x 4.5 kWh
        (0, 3, 0.6, 0.6 - 5e-4, 1.0, 0.00125),  # within the 1e-3 tolerance: not a miss
    ]
    return pd.DataFrame(rows, columns=list(DEPARTURE_COLUMNS))


def _two_fleet_config():
    config = hand_site_config(bess_capacity_kwh=50.0, soc_min=0.2, initial_soc=0.5)
    config.ev = EVConfig(
        fleets=[
            EVFleetConfig(name="moto", sockets=1, charger_kw=2.0, battery_kwh=2.5, avoided_tailpipe_kg_per_kwh=0.87),
            EVFleetConfig(name="taxi", sockets=1, charger_kw=3.0, battery_kwh=4.5, avoided_tailpipe_kg_per_kwh=0.47),
        ]
    )
    return config


def test_kpis_match_hand_computed_values() -> None:
    kpis = compute_kpis(_flows(), _departures(), _two_fleet_config())

    assert kpis["grid_import_kwh"] == pytest.approx(16.0)
    assert kpis["co2_kg"] == pytest.approx(16.0 * 0.4521)
    assert kpis["cost"] == pytest.approx(12.0 * 0.28 + 4.0 * 0.45)
    assert kpis["peak_import_kw"] == pytest.approx(12.0)
    assert kpis["pv_generation_kwh"] == pytest.approx(35.0)
    # 6 kWh of the 35 left the site: (35 - 6) / 35.
    assert kpis["pv_self_consumption_pct"] == pytest.approx(100.0 * 29.0 / 35.0)
    assert kpis["grid_export_kwh"] == pytest.approx(6.0)
    assert kpis["ev_energy_served_kwh"] == pytest.approx(4.5)
    assert kpis["ev_unmet_kwh"] == pytest.approx(0.90125)
    assert kpis["ev_departures"] == 3
    assert kpis["departures_below_required"] == 1
    # 4 kWh discharged over a usable window of 50 x (1.0 - 0.2) = 40 kWh.
    assert kpis["bess_equivalent_full_cycles"] == pytest.approx(0.1)
    # Moto sessions 1.5 + 1.0 kWh at 0.87, the taxi's 2.0 kWh at 0.47.
    assert kpis["avoided_tailpipe_co2_kg"] == pytest.approx(2.5 * 0.87 + 2.0 * 0.47)
    assert kpis["energy_balance_max_error_kw"] == pytest.approx(0.0, abs=1e-12)
    assert set(kpis) == set(KPI_UNITS)


def test_energy_balance_error_reports_the_worst_hour() -> None:
    flows = _flows()
    flows.loc[1, "grid_export_kw"] = 8.5  # 2.5 kW more leaves than arrives
    residual = energy_balance_residual_kw(flows)

    assert residual.tolist() == pytest.approx([0.0, -2.5, 0.0])
    assert compute_kpis(flows, _departures(), _two_fleet_config())["energy_balance_max_error_kw"] == pytest.approx(2.5)


def test_kpis_refuse_tables_missing_columns() -> None:
    with pytest.raises(ValueError, match="grid_import_kw"):
        compute_kpis(_flows().drop(columns="grid_import_kw"), _departures(), _two_fleet_config())


def test_unavoidable_unmet_is_need_beyond_charger_power_times_dwell() -> None:
    """4 kWh EVs on a 2 kW charger: 3.2 kWh in 1 h misses 1.2; 2 kWh in 2 h and a full EV miss nothing."""
    series = hand_series(
        hand_site_config(),
        pv_kw=[0.0] * 4,
        mall_kw=[0.0] * 4,
        price_per_kwh=[0.3] * 4,
        sessions=[(0, 0, 1, 0.1, 0.9), (0, 1, 3, 0.25, 0.75), (0, 3, 4, 0.8, 0.8)],
    )
    assert unavoidable_unmet_kwh(series) == pytest.approx(1.2)
    # A session that leaves in the hour it arrives is never plugged: its whole need (3.2 kWh) is unavoidable.
    passing = hand_series(
        hand_site_config(), pv_kw=[0.0] * 3, mall_kw=[0.0] * 3, price_per_kwh=[0.3] * 3, sessions=[(0, 1, 1, 0.1, 0.9)]
    )
    assert unavoidable_unmet_kwh(passing) == pytest.approx(3.2)
    no_sessions = hand_series(hand_site_config(), pv_kw=[0.0], mall_kw=[0.0], price_per_kwh=[0.3], sessions=[])
    assert unavoidable_unmet_kwh(no_sessions) == 0.0


def _table(rows: list[tuple[float, ...]]) -> pd.DataFrame:
    """Flow rows (pv, mall, ev, bess charge, bess discharge, import, export, soc, price, intensity)."""
    return pd.DataFrame(rows, columns=list(FLOW_COLUMNS))


def test_kpis_at_their_edges_no_pv_little_pv_exports_beyond_pv_an_empty_episode_and_the_tolerance() -> None:
    """The cases the mutation run (docs/testing.md) found unpinned, each worked by hand."""
    config = _two_fleet_config()
    no_departures = pd.DataFrame(columns=list(DEPARTURE_COLUMNS))
    dark = compute_kpis(_table([(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.28, 0.45)] * 2), no_departures, config)
    assert dark["pv_self_consumption_pct"] == 0.0  # no PV at all: 0 %, not a division by zero
    assert dark["peak_import_kw"] == 0.0  # nothing imported: the peak is 0, not the max's starting value
    little = compute_kpis(_table([(0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.28, 0.45)]), no_departures, config)
    assert little["pv_self_consumption_pct"] == pytest.approx(100.0)  # 0.5 kWh of PV, all used on site
    # Hour 1: the BESS sends 5 kW to the grid beside 2 kW of PV (7 kW exported): no PV was used that hour,
    # not -5 kWh. Hour 2: 10 kW of PV used on site. So 10 of 12 kWh.
    beyond = _table(
        [(2.0, 0.0, 0.0, 0.0, 5.0, 0.0, 7.0, 0.5, 0.28, 0.45), (10.0, 10.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.28, 0.45)]
    )
    assert compute_kpis(beyond, no_departures, config)["pv_self_consumption_pct"] == pytest.approx(100.0 * 10 / 12)
    empty = compute_kpis(_table([]), no_departures, config)
    assert empty["peak_import_kw"] == 0.0 and empty["energy_balance_max_error_kw"] == 0.0
    # A departure short by exactly the tolerance is served; the KPI counts only what is short by more.
    edge = pd.DataFrame([(0, 2, 0.6, 0.6 - DEPARTURE_SOC_TOLERANCE, 1.0, 0.0)], columns=list(DEPARTURE_COLUMNS))
    assert compute_kpis(_flows(), edge, config)["departures_below_required"] == 0.0
