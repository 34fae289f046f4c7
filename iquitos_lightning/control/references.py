"""Reference controllers (docs/site.md, "Reference controllers"): what a learned agent must beat.

Why pure functions of :class:`~iquitos_lightning.envs.state.SiteState`: the references act on
physical quantities (kW, kWh, SOC), not on normalised observations, so their logic is readable
and testable without a simulator; :mod:`iquitos_lightning.control.rollout` runs any of them
through the environment. Every controller returns the environment's action vector
``[BESS, socket_0, ..., socket_{S-1}]`` in [-1, 1]: the BESS as a fraction of its power
(+charge / -discharge, grid side) and each socket as a fraction of its charger power.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from iquitos_lightning.envs.state import SiteState
from iquitos_lightning.site.config import SiteConfig

# Energy (kWh) added to a just-in-time EV plan so float rounding cannot leave an EV a hair short.
JUST_IN_TIME_MARGIN_KWH = 1e-6


class Controller(Protocol):
    """Anything that maps the site's physical state to the environment's action vector."""

    name: str

    def act(self, state: SiteState) -> np.ndarray: ...


class UncontrolledController:
    """Every connected socket at full power from plug-in; the BESS idles."""

    name = "uncontrolled"

    def __init__(self, site_config: SiteConfig) -> None:
        self.socket_count = site_config.ev.socket_count

    def act(self, state: SiteState) -> np.ndarray:
        actions = np.zeros(1 + self.socket_count)
        actions[1:] = state.socket_connected.astype(float)
        return actions


class RuleBasedController:
    """PV surplus charges the BESS, the BESS covers the net load in the peak window, EVs charge just in time.

    Per hour: every EV first gets the least power that still lets full power in its remaining
    hours reach its required SOC (least laxity); PV surplus over the mall and those minimums then
    tops EVs up now, least-laxity first (so they need less later, outside the sun); what surplus is
    left charges the BESS; in the peak window (``grid.peak_start_hour`` to ``grid.peak_end_hour``)
    the BESS discharges to cover the net load (mall + EV - PV), within its SOC window.
    """

    name = "rule_based"

    def __init__(self, site_config: SiteConfig, *, charger_efficiency: float = 1.0) -> None:
        self.site_config = site_config
        self.charger_efficiency = charger_efficiency
        fleets = site_config.ev.fleets
        self.charger_kw = np.concatenate([[fleet.charger_kw] * fleet.sockets for fleet in fleets]).astype(float)
        self.battery_kwh = np.concatenate([[fleet.battery_kwh] * fleet.sockets for fleet in fleets]).astype(float)

    def act(self, state: SiteState) -> np.ndarray:
        socket_kw = self.ev_power_kw(state)
        bess_kw = self.bess_power_kw(state, ev_kw=float(socket_kw.sum()))
        return np.concatenate([[bess_kw / self.site_config.bess.power_kw], socket_kw / self.charger_kw])

    def ev_power_kw(self, state: SiteState) -> np.ndarray:
        """Grid-side charging power per socket: the just-in-time minimum plus PV surplus, least laxity first."""
        connected = state.socket_connected.astype(bool)
        gap_soc = np.clip(state.socket_required_soc - state.socket_soc, 0.0, None)
        need_kwh = np.where(connected, gap_soc * self.battery_kwh / self.charger_efficiency, 0.0)
        hours_left = np.maximum(state.socket_hours_to_departure, 1)
        wanted_kw = np.minimum(need_kwh, self.charger_kw)
        later_kwh = (hours_left - 1) * self.charger_kw
        minimum_kw = np.clip(need_kwh - later_kwh + JUST_IN_TIME_MARGIN_KWH, 0.0, wanted_kw)
        minimum_kw = np.where(need_kwh > 0, minimum_kw, 0.0)

        surplus_kw = state.pv_kw - state.mall_kw - float(minimum_kw.sum())
        power_kw = minimum_kw.copy()
        if surplus_kw > 0:
            laxity_h = hours_left - need_kwh / self.charger_kw
            for socket in np.argsort(laxity_h, kind="stable"):
                if surplus_kw <= 0:
                    break
                extra_kw = min(wanted_kw[socket] - power_kw[socket], surplus_kw)
                if extra_kw > 0:
                    power_kw[socket] += extra_kw
                    surplus_kw -= extra_kw
        return power_kw

    def bess_power_kw(self, state: SiteState, *, ev_kw: float) -> float:
        """Signed grid-side BESS power: + stores PV surplus, - covers net load in the peak window."""
        bess = self.site_config.bess
        grid = self.site_config.grid
        eta = bess.one_way_efficiency
        net_load_kw = state.mall_kw + ev_kw - state.pv_kw
        if net_load_kw < 0:
            room_kwh = max(bess.soc_max - state.bess_soc, 0.0) * bess.capacity_kwh / eta
            return min(-net_load_kw, bess.power_kw, room_kwh)
        if grid.peak_start_hour <= state.hour_of_day < grid.peak_end_hour:
            available_kwh = max(state.bess_soc - bess.soc_min, 0.0) * bess.capacity_kwh * eta
            return -min(net_load_kw, bess.power_kw, available_kwh)
        return 0.0


class ReplayController:
    """Plays a precomputed action table (e.g. the LP's plan), one row per time step."""

    def __init__(self, actions: np.ndarray, name: str = "replay") -> None:
        self.actions = np.asarray(actions, dtype=float)
        self.name = name

    def act(self, state: SiteState) -> np.ndarray:
        return self.actions[state.time_step]
