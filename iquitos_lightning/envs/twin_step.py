"""One hour of a twin's B envs: the action onto the sockets' bands, the batteries charged, the building's grid exchange,
the reward, the next clocks and the next observations, as a pure function of the state.

Why a module of its own: this is the physics the twin must keep bit-equal to CityLearn (tests/envs/test_twin.py)
and that ``compile_physics`` fuses (``torch.compile`` of :meth:`TwinStep._simulate`); the TorchRL API around it
(envs/twin.py: specs, resets, the state it hands in and takes back) is another matter. It is a mixin of
``IquitosTwin`` and reads the twin's options, tables (envs/twin_tables.py) and physics models (envs/twin_physics.py),
set when the twin is built. No Python loop over envs or sockets: one step is a few dozen tensor ops on [B] and [B, S].

CityLearn's odd bits it keeps (besides those of the battery model, see ``twin_physics``):
- the building's net consumption is summed in float32 (``mall + BESS``, then ``+ (-PV)``, then
  ``+ EVs``, each a float32 add) while the chargers' total is a float64 sum rounded to float32;
  grid import and export come from that float32 net;
- an EV's SOC is forced to its session's arrival SOC (as float32) on the arrival step, also when
  it follows another session of the same socket back to back;
- the terminal observation shows the sockets of the last step with their SOC after it (the
  Gymnasium env does not re-read them once the episode is over).
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from collections.abc import Callable
from typing import Any

import torch

from iquitos_lightning.envs import objectives
from iquitos_lightning.envs.actions import SocketBands, socket_bands, socket_power
from iquitos_lightning.envs.env_action import applied_action
from iquitos_lightning.envs.import_limit import cap_import
from iquitos_lightning.envs.reward import RewardScales, RewardWeights, StepOutcome, reward_terms, weighted_reward
from iquitos_lightning.envs.site_tables import COMPACT, SOCKET_FEATURES, SiteTables, state_columns
from iquitos_lightning.envs.twin_physics import SiteModels
from iquitos_lightning.envs.twin_tables import StackedTables
from iquitos_lightning.site.config import SiteConfig

F64 = torch.float64


def compiled_physics(simulate: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compile`` of the step's physics, or the eager step with one warning where this machine has no C++
    compiler: Inductor writes C++ for the CPU (and its GPU launchers), so without one the first step would fail deep
    inside the compiler; eager gives the same numbers (tests/envs/test_twin_compiled.py), only slower."""
    if not cpp_compiler():
        warnings.warn(
            "env.backend.compile: no C++ compiler found (CXX, g++, c++, clang++ or cl on the PATH), so the twin "
            "steps eagerly: the same results, slower; install one or set backend.compile false",
            stacklevel=3,
        )
        return simulate
    return torch.compile(simulate, dynamic=False)


def cpp_compiler() -> str | None:
    """The C++ compiler torch.compile would call here: ``$CXX``, else the usual names (``cl`` on Windows)."""
    names = [os.environ["CXX"]] if os.environ.get("CXX") else []
    names += ["cl"] if sys.platform == "win32" else ["g++", "c++", "clang++"]
    return next((found for found in map(shutil.which, names) if found), None)


class TwinStep:
    """The step physics of ``IquitosTwin`` (envs/twin.py), which sets what it reads when it is built."""

    # what the step reads of the twin (its options, tables and models)
    models: SiteModels
    stacked: StackedTables
    tables: SiteTables  # the first year's: the observation layout
    site_config: SiteConfig
    num_envs: int
    sockets: int
    hours: int
    record: bool
    layout: str
    idle_band: float
    ev_guarantee: bool
    charger_efficiency: float
    observation: str
    objective: str
    tariff: objectives.TariffReward
    reward_scales: RewardScales
    reward_weights: RewardWeights
    stored_energy_value: float
    shaping_gamma: float
    _row_offset: torch.Tensor  # [B] each env's year offset into the stacked rows
    _baseline_rewards: torch.Tensor | None

    def _simulate(
        self,
        t: torch.Tensor,
        soc: torch.Tensor,
        capacity: torch.Tensor | None,
        peak: torch.Tensor,
        action: torch.Tensor,
        bands: SocketBands | None = None,
    ) -> tuple[Any, ...]:
        """One hour of every env, a pure function of the state (so ``compile_physics`` can fuse it).

        ``bands``: this hour's socket bands when the state carries them (the compact observation computed them
        for itself, from the same clocks and SOCs); None: computed here.

        Returns the next clocks, SOCs, capacities, month-to-date peaks and observations, the float32
        reward [B, 1], ``terminated`` [B, 1], with ``record`` this hour's FLOW_COLUMNS rows and
        departing SOCs (else None, None), and the next hour's bands (compact; else None).
        """
        models, stacked = self.models, self.stacked
        action = action.to(F64).clamp(-1.0, 1.0)
        row = t + self._row_offset  # each env's row of the stacked years' tables
        connected = stacked.connected[row]
        required = stacked.required_soc[row]

        # The env's action -> each socket's kW inside its band -> the fraction of charger power CityLearn takes.
        if bands is None:
            bands = self._bands_at(row, soc[:, 1:])
        hourly, hourly_f32 = stacked.hourly[row], stacked.hourly_f32[row]
        in_window = stacked.in_peak_window[row]
        action = applied_action(
            self.layout,
            action,
            pv_kw=hourly[:, 0],
            mall_kw=hourly[:, 1],
            bands=bands,
            in_peak_window=in_window > 0,
            bess=self.site_config.bess,
            idle_band=self.idle_band,
        )
        bess_action, socket_kw = cap_import(
            action[:, 0],
            socket_power(self.layout, action, bands),
            pv_kw=hourly[:, 0],
            mall_kw=hourly[:, 1],
            guaranteed_kw=bands.low,
            bess_power_kw=self.site_config.bess.power_kw,
            limit_kw=self.site_config.grid.import_limit_kw,
        )
        physical = torch.cat([bess_action[:, None], socket_kw / stacked.charger_kw], -1)

        # Every battery at once: BESS (column 0) and the EV of each socket (columns 1..S).
        soc_end, balance, capacity = models.batteries.charge(soc, models.battery_energy(physical, connected), capacity)
        bess_kw = balance[:, 0]
        socket_kw = torch.where(connected, models.charger_consumption(balance[:, 1:]), 0.0)
        soc_before = soc[:, 1:]
        soc_after = torch.where(connected, soc_end[:, 1:], soc_before)

        # Building.update_variables: float32 net (see the module docstring).
        ev_total_f32 = socket_kw.sum(-1, dtype=F64).to(torch.float32)
        net = (((hourly_f32[:, 0] + bess_kw) + hourly_f32[:, 1]) + ev_total_f32).to(F64)
        grid_import = net.clamp_min(0.0)

        useful_kwh = torch.minimum(socket_kw, (required - soc_before).clamp_min(0.0) * stacked.battery_kwh).sum(-1)
        departing = stacked.departing[row]
        gap_kwh = (required - soc_after).clamp_min(0.0) * stacked.battery_kwh
        bess_kw = bess_kw.to(F64)
        bess_charge = bess_kw.clamp_min(0.0)
        outcome = StepOutcome(
            grid_import_kw=grid_import,
            pv_kw=hourly[:, 0],
            mall_kw=hourly[:, 1],
            bess_charge_kw=bess_charge,
            ev_useful_kwh=useful_kwh,
            departing_unmet_kwh=torch.where(departing, gap_kwh, 0.0).sum(-1),
            price_per_kwh=hourly[:, 2],
            carbon_intensity_kg_per_kwh=hourly[:, 3],
        )
        if self.objective == objectives.TARIFF:
            reward = self.tariff(grid_import, hourly[:, 2], hourly[:, 3], peak, in_window)
        else:
            reward = weighted_reward(reward_terms(outcome, self.reward_scales), self.reward_weights)
        if self.stored_energy_value:
            reward = reward + self._shaping(soc[:, 0].to(F64), soc_end[:, 0].to(F64))
        if self._baseline_rewards is not None:
            reward = reward - self._baseline_rewards[row]
        peak = objectives.next_peak_to_date(grid_import, peak, in_window)
        flows = departing_soc = None
        if self.record:  # the Gymnasium env's bookkeeping (FLOW_COLUMNS order)
            flow = (hourly[:, 0], hourly[:, 1], socket_kw.sum(-1, dtype=F64), bess_charge, (-bess_kw).clamp_min(0.0))
            flow += (grid_import, (-net).clamp_min(0.0), soc_end[:, 0].to(F64), hourly[:, 2], hourly[:, 3])
            flows = torch.stack(flow, -1)
            departing_soc = torch.where(departing, soc_after, 0.0)

        # Advance the clocks: standby loss, then the EVs plugged at the next step (arrivals forced).
        t_next = t + 1
        terminated = (t_next >= self.hours)[:, None]
        step = t_next.clamp_max(self.hours - 1) + self._row_offset  # the next step's row
        soc_next = models.batteries.standby(soc_end)
        starting = torch.where(stacked.arriving[step], stacked.arrival_soc[step], soc_next[:, 1:])
        soc_next[:, 1:] = torch.where(stacked.connected[step], starting, 0.0)
        peak = torch.where(stacked.demand_period_start[step] & ~terminated[:, 0], 0.0, peak)
        socket_soc = torch.where(terminated, soc_after, soc_next[:, 1:])
        observation, next_bands = self._observe(step, soc_end[:, 0], socket_soc, peak)
        reward = reward.to(torch.float32)[:, None]
        return t_next, soc_next, capacity, peak, observation, reward, terminated, flows, departing_soc, next_bands

    def _shaping(self, soc_before: Any, soc_after: Any) -> Any:
        bess = self.site_config.bess
        return objectives.stored_energy_shaping(
            soc_before,
            soc_after,
            self.stored_energy_value,
            bess.capacity_kwh,
            self.shaping_gamma,
            objectives.shaping_scale(self.objective, self.tariff.scale, self.reward_scales.max_import_kw),
        )

    def _bands_at(self, row: torch.Tensor, socket_soc: torch.Tensor) -> SocketBands:
        """Each env's socket bands at its row (year offset + clock) for the plugged EVs' SOCs ``socket_soc``."""
        stacked = self.stacked
        return socket_bands(
            stacked.connected[row],
            socket_soc,
            stacked.required_soc[row],
            stacked.hours_left[row],
            stacked.battery_kwh,
            stacked.charger_kw,
            charger_efficiency=self.charger_efficiency,
            guarantee=self.ev_guarantee,
        )

    def _observe(
        self, step: torch.Tensor, bess_soc: torch.Tensor, socket_soc: torch.Tensor, peak: torch.Tensor
    ) -> tuple[torch.Tensor, SocketBands | None]:
        """The float32 observations: the step's table row (``step``: each env's row, year offset + clock) with the
        state columns (BESS SOC, the peak, the fleet sums of ``compact``; the socket SOCs of ``full``) written in,
        by the CityLearn env's functions; and, ``compact``, the bands it read, which are the next ``_simulate``'s
        (same rows, same SOCs: the state carries them so the step does not compute them twice; a terminated env's
        bands, read from the SOCs after its last hour, are replaced by its reset before any step reads them)."""
        stacked = self.stacked
        observation = stacked.observation[step]
        bands = connected = hours_left = None
        if self.observation == COMPACT:  # the band the next action maps onto, as _simulate computes it
            connected, hours_left = stacked.connected[step], stacked.hours_left[step]
            bands = socket_bands(
                connected,
                socket_soc,
                stacked.required_soc[step],
                hours_left,
                stacked.battery_kwh,
                stacked.charger_kw,
                charger_efficiency=self.charger_efficiency,
                guarantee=self.ev_guarantee,
            )
        state = state_columns(self.tables, bess_soc, peak, bands, connected, hours_left)
        observation[:, stacked.bess_index : stacked.state_end] = state.to(torch.float32)
        if self.observation != COMPACT:
            sockets = observation[:, stacked.state_end :].view(self.num_envs, self.sockets, len(SOCKET_FEATURES))
            sockets[:, :, SOCKET_FEATURES.index("soc")] = socket_soc
        return observation, bands
