"""Reference controllers (docs/site.md, "Reference controllers"): what a learned agent must beat.

Why pure functions of :class:`~iquitos_lightning.envs.state.SiteState`: the references act on
physical quantities (kW, kWh, SOC), not on normalised observations, so their logic is readable
and testable without a simulator; :mod:`iquitos_lightning.control.rollout` runs any of them
through the environment. Every controller returns the ``per_socket`` action vector
``[BESS, socket_0, ..., socket_{S-1}]`` in [-1, 1]: the BESS as a fraction of its power
(+charge / -discharge, grid side) and each socket's wish in kW sent through the inverse of the
env's mapping onto the socket's band (:mod:`~iquitos_lightning.envs.actions`): the same EV guarantee
bounds every controller, learned or not.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from iquitos_lightning.envs.actions import SocketBands, power_to_action, socket_bands
from iquitos_lightning.envs.state import SiteState
from iquitos_lightning.site.config import SiteConfig


def socket_arrays(site_config: SiteConfig) -> tuple[np.ndarray, np.ndarray]:
    """Charger kW and battery kWh of every socket (sockets are numbered fleet after fleet)."""
    fleets = site_config.ev.fleets
    charger_kw = np.concatenate([[fleet.charger_kw] * fleet.sockets for fleet in fleets]).astype(float)
    battery_kwh = np.concatenate([[fleet.battery_kwh] * fleet.sockets for fleet in fleets]).astype(float)
    return charger_kw, battery_kwh


def state_bands(
    state: SiteState, charger_kw: np.ndarray, battery_kwh: np.ndarray, *, charger_efficiency: float = 1.0
) -> SocketBands:
    """The sockets' bands with the EV guarantee for ``state`` (the env computes the same from the same state)."""
    return socket_bands(
        state.socket_connected.astype(bool),
        state.socket_soc,
        state.socket_required_soc,
        state.socket_hours_to_departure,
        battery_kwh,
        charger_kw,
        charger_efficiency=charger_efficiency,
    )


class Controller(Protocol):
    """Anything that maps the site's physical state to the environment's action vector."""

    name: str

    def act(self, state: SiteState) -> np.ndarray: ...


class UncontrolledController:
    """Every connected socket at full power from plug-in (the top of its band: until the EV has what it needs,
    with the guarantee on); the BESS idles."""

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
    hours reach its required SOC (the EV guarantee's minimum, envs/actions.py); PV surplus over the
    mall and those minimums then
    tops EVs up now, least-laxity first (so they need less later, outside the sun); what surplus is
    left charges the BESS; in the peak window (``grid.peak_start_hour`` to ``grid.peak_end_hour``)
    the BESS discharges to cover the net load (mall + EV - PV), within its SOC window.
    """

    name = "rule_based"

    def __init__(self, site_config: SiteConfig, *, charger_efficiency: float = 1.0) -> None:
        self.site_config = site_config
        self.charger_efficiency = charger_efficiency
        self.charger_kw, self.battery_kwh = socket_arrays(site_config)

    def act(self, state: SiteState) -> np.ndarray:
        bands = self.bands(state)
        socket_kw = self.ev_power_kw(state, bands)
        bess_kw = self.bess_power_kw(state, ev_kw=float(socket_kw.sum()))
        return np.concatenate([[bess_kw / self.site_config.bess.power_kw], power_to_action(socket_kw, bands)])

    def bands(self, state: SiteState) -> SocketBands:
        return state_bands(state, self.charger_kw, self.battery_kwh, charger_efficiency=self.charger_efficiency)

    def ev_power_kw(self, state: SiteState, bands: SocketBands | None = None) -> np.ndarray:
        """Grid-side charging power per socket: the guarantee's minimum plus PV surplus, least laxity first."""
        bands = bands or self.bands(state)
        minimum_kw, wanted_kw = bands.low, bands.high
        surplus_kw = state.pv_kw - state.mall_kw - float(minimum_kw.sum())
        power_kw = minimum_kw.copy()
        if surplus_kw > 0:
            for socket in np.argsort(bands.laxity_h, kind="stable"):
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


class PlanController:
    """Plays a precomputed physical plan (BESS kW and socket kW per hour, e.g. an LP's) through the band mapping."""

    def __init__(self, bess_kw: np.ndarray, socket_kw: np.ndarray, site_config: SiteConfig, name: str = "plan") -> None:
        self.bess_kw = np.asarray(bess_kw, dtype=float)
        self.socket_kw = np.asarray(socket_kw, dtype=float)
        self.site_config = site_config
        self.charger_kw, self.battery_kwh = socket_arrays(site_config)
        self.name = name

    def act(self, state: SiteState) -> np.ndarray:
        t = state.time_step
        bands = state_bands(state, self.charger_kw, self.battery_kwh)
        bess = np.clip(self.bess_kw[t] / self.site_config.bess.power_kw, -1.0, 1.0)
        return np.concatenate([[bess], power_to_action(self.socket_kw[t], bands)])


class ReplayController:
    """Plays a precomputed action table (e.g. the LP's plan), one row per time step."""

    def __init__(self, actions: np.ndarray, name: str = "replay") -> None:
        self.actions = np.asarray(actions, dtype=float)
        self.name = name

    def act(self, state: SiteState) -> np.ndarray:
        return self.actions[state.time_step]
