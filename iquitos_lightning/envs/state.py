"""What the site environment exposes besides observations: its physical state at the start of a step.

Why: reference controllers (rule-based, LP replay) act on physical quantities, not on normalised
observations. The energy flows an episode records, from which every KPI is computed, are defined one
layer down, in :mod:`iquitos_lightning.metrics.flows`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
