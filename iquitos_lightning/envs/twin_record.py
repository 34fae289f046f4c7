"""A recording twin's KPI tables: its envs' hourly flows and EV departures as the CityLearn env's frames.

Why: the KPIs (metrics/kpis.py) are computed from two tables, FLOW_COLUMNS and DEPARTURE_COLUMNS, whichever simulator
ran. A twin built with ``record=True`` keeps what they need in its state (each hour's flows, each departing EV's
SOC, written by its step); this turns one env's part of that state into the two frames, as the CityLearn env
writes them, so an evaluation on the twin (envs/twin_site.py, envs/twin_gym.py) is scored by the same code.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from iquitos_lightning.envs.twin_state import TwinState
from iquitos_lightning.envs.twin_tables import StackedTables
from iquitos_lightning.metrics.flows import DEPARTURE_COLUMNS, FLOW_COLUMNS


def flows_frame(state: TwinState, env_index: int) -> pd.DataFrame:
    """Hourly energy flows (FLOW_COLUMNS) of env ``env_index``'s steps so far in this episode."""
    steps = int(state.t[env_index])
    return pd.DataFrame(state.flows[env_index, :steps].cpu().numpy(), columns=list(FLOW_COLUMNS))


def departures_frame(
    state: TwinState, stacked: StackedTables, required_soc: np.ndarray, battery_kwh: np.ndarray, env_index: int
) -> pd.DataFrame:
    """One row per EV that left env ``env_index`` so far (DEPARTURE_COLUMNS), by step then socket; ``stacked`` holds
    one year, ``required_soc`` [T, S] its sessions' required SOCs, ``battery_kwh`` [S] the EVs' capacities."""
    steps = int(state.t[env_index])
    step, socket = np.nonzero(stacked.departing[:steps].cpu().numpy())
    soc = state.departure_soc[env_index, :steps].cpu().numpy().astype(np.float64)[step, socket]
    required = required_soc[step, socket]
    battery = battery_kwh[socket]
    table = pd.DataFrame(
        {
            "socket": socket,
            "departure_step": step + 1,
            "required_soc": required,
            "departure_soc": soc,
            "energy_delivered_kwh": (soc - stacked.session_arrival_soc[step, socket]) * battery,
            "unmet_kwh": np.clip(required - soc, 0.0, None) * battery,
        },
        columns=list(DEPARTURE_COLUMNS),
    )
    return table.astype({"socket": int, "departure_step": int})
