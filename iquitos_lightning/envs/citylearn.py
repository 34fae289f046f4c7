"""The Iquitos site as a plain Gymnasium env around CityLearn 3 (and a TorchRL wrapper for agents).

Why a wrapper of our own: CityLearn's observation dict, its reward and its
``NormalizedObservationWrapper`` cost more than the simulation itself (profiled: docs/performance.md). This env lets
CityLearn do the physics (PV, mall load, BESS, chargers, EV batteries) and reads the raw state
straight from its building objects; calendar, forecasts and session facts (connected, required
SOC, hours to departure) come from the site series, which are the data CityLearn was built from.
Observations are normalised with constants fixed at construction, in the layout ``observation`` names
(``full``, ``compact`` or ``auto``: :mod:`~iquitos_lightning.envs.site_tables`).

Actions in [-1, 1] in any of the layouts of :data:`~iquitos_lightning.envs.actions.LAYOUTS`
(``layout``): ``per_socket`` ``[BESS, socket_0 .. socket_{S-1}]``, ``fleet`` ``[BESS, EV fleet]``, or a
derived layout (``self_consumption_window``) that
:func:`~iquitos_lightning.envs.env_action.applied_action` turns into a ``fleet`` action (a controller above the env,
such as a residual's, reads :meth:`IquitosEnv.hour_context`). The BESS is a
fraction of its power (+charge / -discharge, grid side); sockets map affinely onto their band of
this hour, which with ``ev_guarantee`` (the default) starts at the least-laxity minimum that still
serves the EV by its departure and ends at its remaining need. The env turns that into the fraction of
charger power CityLearn takes. The reward is the ``objective``'s (:mod:`~iquitos_lightning.envs.objectives`);
both objectives' returns are kept (:meth:`IquitosEnv.objective_returns`). CityLearn's semantics, read
from its source:
- an EV connects at the start of ``arrival_step`` with its arrival SOC (forced by CityLearn on a new
  session id) and leaves at the start of ``departure_step``; its SOC after the last hour is the
  departure SOC;
- a charger action a > 0 puts a x charger kW x 1 h into the EV battery (charger and battery are
  lossless, flat curves), cut only at SOC 1: CityLearn does NOT stop at the required SOC, the
  reward does not pay for what goes beyond;
- the BESS charges and discharges with sqrt(round trip) each way, within [soc_min, 1] x capacity,
  at most its nominal power; requests beyond the limits are clipped by CityLearn (the flows show
  what really happened);
- CityLearn also drifts the SOC of EVs that are not plugged in at random; it never matters here
  because every session starts from its forced arrival SOC.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
from citylearn.citylearn import CityLearnEnv
from citylearn.reward_function import RewardFunction

from iquitos_lightning.envs import objectives
from iquitos_lightning.envs.actions import (
    PER_SOCKET,
    SocketBands,
    action_count,
    socket_bands,
    socket_power,
)
from iquitos_lightning.envs.env_action import applied_action
from iquitos_lightning.envs.hour_context import HourContext
from iquitos_lightning.envs.import_limit import cap_import
from iquitos_lightning.envs.reward import RewardScales, RewardWeights, StepOutcome, reward_terms, weighted_reward
from iquitos_lightning.envs.self_consumption import check_idle_band
from iquitos_lightning.envs.site_data import built_site
from iquitos_lightning.envs.site_tables import AUTO, COMPACT, build_site_tables, observation_vector, resolve_observation
from iquitos_lightning.envs.state import SiteState
from iquitos_lightning.fastpath.citylearn_feedback import skip_action_feedback
from iquitos_lightning.fastpath.citylearn_step import citylearn_transition
from iquitos_lightning.metrics.flows import DEPARTURE_COLUMNS, FLOW_COLUMNS
from iquitos_lightning.site.charger_files import charger_id, ev_name
from iquitos_lightning.site.config import SiteConfig
from iquitos_lightning.site.forecasts import PAST_DAYS, check_forecasts
from iquitos_lightning.site.series import SiteSeries


class NullReward(RewardFunction):
    """A CityLearn reward that asks for no observations (cheap): the wrapper computes the real one."""

    def get_required_observation_names(self) -> tuple[str, ...]:
        return ()

    def calculate(self, observations: list) -> list[float]:
        return [0.0]


class IquitosEnv(gym.Env):
    """Gymnasium env of one built site (module docstring); one episode = ``config.hours`` steps."""

    metadata = {"render_modes": []}
    charger_efficiency = 1.0

    def __init__(
        self,
        schema_path: Path,
        series: SiteSeries,
        reward_weights: RewardWeights | None = None,
        *,
        layout: str = PER_SOCKET,
        ev_guarantee: bool = True,
        objective: str = objectives.THESIS,
        tariff_weights: objectives.TariffWeights | None = None,
        demand_period: str = objectives.MONTH,
        stored_energy_value: float = 0.0,
        shaping_gamma: float = 0.99,
        observation: str = AUTO,
        forecasts: str = PAST_DAYS,
        idle_band: float = 0.0,
    ) -> None:
        self.schema_path = Path(schema_path)
        self.series = series
        self.site_config: SiteConfig = series.config
        self.reward_weights = reward_weights or RewardWeights()
        self.reward_scales = RewardScales.for_series(series)
        self.layout = layout
        self.idle_band = check_idle_band(idle_band)  # the self_consumption layouts: BESS actions within it of 0 idle
        self.ev_guarantee = ev_guarantee
        self.objective = objectives.check_objective(objective)
        self.demand_period = objectives.check_demand_period(demand_period)
        self.observation = resolve_observation(observation, layout)  # "full" or "compact"
        self.forecasts = check_forecasts(forecasts)  # what the coming hours' PV and mall are (site/forecasts.py)
        # tariff training aid (objectives.stored_energy_shaping): PEN per kWh in the BESS, and the agent's discount
        self.stored_energy_value = stored_energy_value
        self.shaping_gamma = shaping_gamma
        self.tariff = objectives.TariffReward.for_site(
            self.site_config, self.reward_scales, tariff_weights, self.demand_period
        )
        self.citylearn = CityLearnEnv(str(schema_path), central_agent=True, offline=True, reward_function=NullReward)
        self.building = self.citylearn.buildings[0]
        self.sockets = self.site_config.ev.socket_count
        chargers = {charger.charger_id: charger for charger in self.building.electric_vehicle_chargers}
        self.chargers = [chargers[charger_id(s)] for s in range(self.sockets)]
        vehicles = {vehicle.name: vehicle for vehicle in self.citylearn.electric_vehicles}
        self.vehicles = [vehicles[ev_name(s)] for s in range(self.sockets)]
        self.hours = series.hours
        self._transition = citylearn_transition(self.citylearn)
        skip_action_feedback(self.citylearn)
        self._precompute()
        self.action_space = gym.spaces.Box(-1.0, 1.0, (action_count(layout, self.sockets),), np.float32)
        size = len(self.observation_names)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        self.time_step = 0
        self._flows = np.zeros((0, len(FLOW_COLUMNS)))  # no step simulated before the first reset
        self._departures: list[tuple] = []

    # ----- static tables -------------------------------------------------------------------
    def _precompute(self) -> None:
        """Per-step session facts [T, S] and the constant part of the observations (shared with the twin)."""
        tables = build_site_tables(
            self.series, self.reward_scales, self.objective, self.demand_period, self.observation, self.forecasts
        )
        self.tables = tables
        self.demand_period_start = tables.demand_period_start
        self.in_peak_window = tables.in_peak_window
        self.session_of = tables.session_of
        self.connected = tables.connected
        self.hours_to_departure = tables.hours_to_departure
        self.required_soc = tables.required_soc
        self.departing = tables.departing
        self.exogenous = tables.exogenous
        self.hour_of_step = tables.hour_of_step
        self.observation_names = tables.observation_names
        self.dwell_scale = tables.dwell_scale
        sessions = self.series.sessions
        self.battery_kwh = self.series.socket_battery_kwh
        self.session_socket = sessions["socket"].to_numpy(int)
        self.session_arrival_soc = sessions["arrival_soc"].to_numpy(float)
        self.session_required_soc = sessions["required_soc"].to_numpy(float)
        self.charger_kw = self.series.socket_charger_kw

    # ----- gymnasium API ---------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.citylearn.reset()
        self.time_step = 0
        self._flows = np.zeros((self.hours, len(FLOW_COLUMNS)))
        self._departures = []
        self._socket_soc = np.zeros(self.sockets)
        self._peak_to_date = 0.0
        self._returns = {objectives.THESIS: 0.0, objectives.TARIFF: 0.0}
        self._read_socket_soc()
        return self._observation(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        t = self.time_step
        if t >= self.hours:
            raise RuntimeError("episode is over: call reset()")
        action = np.clip(np.asarray(action, dtype=np.float64).reshape(-1), -1.0, 1.0)
        bands = self.socket_bands()
        bess_soc_before = self._bess_soc()
        action = applied_action(
            self.layout,
            action,
            pv_kw=float(self.series.pv_kw[t]),
            mall_kw=float(self.series.mall_kw[t]),
            bands=bands,
            in_peak_window=bool(self.in_peak_window[t] > 0),
            bess=self.site_config.bess,
            idle_band=self.idle_band,
        )
        bess_action, socket_kw = cap_import(
            action[0],
            socket_power(self.layout, action, bands),
            pv_kw=float(self.series.pv_kw[t]),
            mall_kw=float(self.series.mall_kw[t]),
            guaranteed_kw=bands.low,
            bess_power_kw=self.site_config.bess.power_kw,
            limit_kw=self.site_config.grid.import_limit_kw,
        )
        socket_action = socket_kw / self.charger_kw
        soc_before = self._socket_soc.copy()
        self._transition([[float(bess_action), *socket_action.tolist()]])

        building = self.building
        pv_kw = -float(building.solar_generation[t])
        mall_kw = float(building.non_shiftable_load_device.electricity_consumption[t])
        bess_kw = float(building.electrical_storage.electricity_consumption[t])
        socket_kw = np.array([charger.electricity_consumption[t] for charger in self.chargers], dtype=float)
        net_kw = float(building.net_electricity_consumption[t])
        bess_soc = float(building.electrical_storage.soc[t])
        soc_after = soc_before.copy()
        for socket in np.flatnonzero(self.connected[t]):
            soc_after[socket] = float(self.vehicles[socket].battery.soc[t])

        need_kwh = np.clip(self.required_soc[t] - soc_before, 0.0, None) * self.battery_kwh
        useful_kwh = float(np.minimum(socket_kw * self.charger_efficiency, need_kwh).sum())
        unmet = 0.0
        for index in self.departing[t]:
            socket = int(self.session_socket[index])
            arrival_soc = self.session_arrival_soc[index]
            required = self.session_required_soc[index]
            battery = self.battery_kwh[socket]
            gap = max(required - soc_after[socket], 0.0) * battery
            unmet += gap
            self._departures.append(
                (socket, t + 1, required, soc_after[socket], (soc_after[socket] - arrival_soc) * battery, gap)
            )
        price = float(self.series.price_per_kwh[t])
        carbon = float(self.series.carbon_intensity_kg_per_kwh[t])
        grid_import = max(net_kw, 0.0)
        self._flows[t] = (
            pv_kw,
            mall_kw,
            float(socket_kw.sum()),
            max(bess_kw, 0.0),
            max(-bess_kw, 0.0),
            grid_import,
            max(-net_kw, 0.0),
            bess_soc,
            price,
            carbon,
        )
        outcome = StepOutcome(
            grid_import_kw=grid_import,
            pv_kw=pv_kw,
            mall_kw=mall_kw,
            bess_charge_kw=max(bess_kw, 0.0),
            ev_useful_kwh=useful_kwh,
            departing_unmet_kwh=unmet,
            price_per_kwh=price,
            carbon_intensity_kg_per_kwh=carbon,
        )
        terms = reward_terms(outcome, self.reward_scales)
        thesis = weighted_reward(terms, self.reward_weights)
        in_window = float(self.in_peak_window[t])
        tariff = self.tariff(grid_import, price, carbon, self._peak_to_date, in_window)
        self._returns[objectives.THESIS] += thesis
        self._returns[objectives.TARIFF] += tariff
        reward = tariff if self.objective == objectives.TARIFF else thesis
        if self.stored_energy_value:
            bess = self.site_config.bess
            reward += objectives.stored_energy_shaping(
                bess_soc_before,
                bess_soc,
                self.stored_energy_value,
                bess.capacity_kwh,
                self.shaping_gamma,
                objectives.shaping_scale(self.objective, self.tariff.scale, self.reward_scales.max_import_kw),
            )
        self._peak_to_date = objectives.next_peak_to_date(grid_import, self._peak_to_date, in_window)

        self.time_step = t + 1
        terminated = self.time_step >= self.hours
        self._socket_soc = soc_after
        if not terminated:
            if self.demand_period_start[self.time_step]:
                self._peak_to_date = 0.0
            self._read_socket_soc()
        return self._observation(), float(reward), terminated, False, {"reward_terms": terms}

    # ----- what controllers and KPIs read ----------------------------------------------------
    def state(self) -> SiteState:
        """Physical state at the start of the current step."""
        t = min(self.time_step, self.hours - 1)
        connected = self.connected[t]
        return SiteState(
            time_step=t,
            hour_of_day=int(self.hour_of_step[t]),
            bess_soc=self._bess_soc(),
            pv_kw=float(self.series.pv_kw[t]),
            mall_kw=float(self.series.mall_kw[t]),
            price_per_kwh=float(self.series.price_per_kwh[t]),
            socket_connected=connected.copy(),
            socket_soc=np.where(connected, self._socket_soc, 0.0),
            socket_required_soc=self.required_soc[t].copy(),
            socket_hours_to_departure=self.hours_to_departure[t].copy(),
            peak_to_date_kw=float(self._peak_to_date),
        )

    def hour_context(self) -> HourContext:
        """What a controller above the env may read of the hour it is at (envs/hour_context.py): the very PV, mall
        load, socket bands and BESS SOC the next step maps its action with."""
        t = min(self.time_step, self.hours - 1)
        return HourContext(
            pv_kw=float(self.series.pv_kw[t]),
            mall_kw=float(self.series.mall_kw[t]),
            bands=self.socket_bands(),
            bess_soc=self._bess_soc(),
            in_peak_window=bool(self.in_peak_window[t] > 0),
            window_rest_kw=self.tables.window_rest_kw[t],
            window_rest_open=self.tables.window_rest_open[t],
            bess=self.site_config.bess,
        )

    def socket_bands(self) -> SocketBands:
        """The power band of every socket this hour (envs/actions.py): what the socket actions map onto."""
        t = min(self.time_step, self.hours - 1)
        return socket_bands(
            self.connected[t],
            self._socket_soc,
            self.required_soc[t],
            self.hours_to_departure[t],
            self.battery_kwh,
            self.charger_kw,
            charger_efficiency=self.charger_efficiency,
            guarantee=self.ev_guarantee,
        )

    def objective_returns(self) -> dict[str, float]:
        """The episode's return so far under each objective (the reward is the ``objective``'s)."""
        return dict(self._returns)

    def flows(self) -> pd.DataFrame:
        """Hourly energy flows (FLOW_COLUMNS) of the steps simulated so far."""
        return pd.DataFrame(self._flows[: self.time_step], columns=list(FLOW_COLUMNS))

    def departures(self) -> pd.DataFrame:
        """One row per EV that left so far (DEPARTURE_COLUMNS)."""
        table = pd.DataFrame(self._departures, columns=list(DEPARTURE_COLUMNS))
        return table.astype({"socket": int, "departure_step": int})

    # ----- internals -------------------------------------------------------------------------
    def _bess_soc(self) -> float:
        """BESS SOC at the start of the current step: the end of the previous one (no standby loss)."""
        storage = self.building.electrical_storage
        return float(storage.soc[max(self.time_step - 1, 0)]) if self.time_step else float(storage.soc[0])

    def _read_socket_soc(self) -> None:
        """SOC of each plugged EV at the start of the current step (the arrival SOC on its first hour)."""
        t = self.time_step
        connected = self.connected[t]
        soc = np.where(connected, self._socket_soc, 0.0)
        for socket in np.flatnonzero(connected):
            soc[socket] = float(self.vehicles[socket].battery.soc[t])
        self._socket_soc = soc

    def _observation(self) -> np.ndarray:
        t = min(self.time_step, self.hours - 1)
        bands = self.socket_bands() if self.observation == COMPACT else None  # the band the next action maps onto
        return observation_vector(self.tables, t, self._bess_soc(), self._socket_soc, self._peak_to_date, bands)


def make_iquitos_env(
    site: str | Path | SiteConfig = "configs/site/iquitos-2026.yaml", *, data_root: Path = Path("data"), **options: Any
) -> IquitosEnv:
    """Build (or reuse) the site's dataset under ``data_root/<name>`` and wrap it as an :class:`IquitosEnv`;
    ``options`` are its keyword arguments (reward weights, action layout, EV guarantee, objective)."""
    build = built_site(site, data_root)
    return IquitosEnv(build.schema_path, build.series, **options)
