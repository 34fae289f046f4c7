"""Model-predictive control (``mpc``): a 24 h LP of the agent's objective, re-solved every hour (HiGHS).

Why: it is what a practitioner would deploy instead of RL, so the learned agents are measured against
it. Each hour the controller solves control/objective_lp.py's model over the next ``horizon`` hours
from the physical state now (BESS SOC, each plugged EV's remaining need and hours left, the month's
peak so far), applies the plan's first hour through the env's band mapping, and forgets the rest.

Two kinds of forecast:
- ``perfect``: the true PV, mall load and EV sessions of the coming hours (an upper bound on MPC);
- ``forecast`` (what it could really have): PV and mall load of each later hour are the ``past_days``
  forecast the agents see by default (site/forecasts.py: the mean of the same hour on the previous 3 days;
  this hour's are observed), and only the EVs plugged in now are planned (arrivals are unknown; the
  guarantee serves them when they come).
Prices and the grid's carbon intensity are a published schedule: known in both.

The stored energy left at the horizon's end is worth the cheapest import of the horizon x the
one-way efficiency (what refilling it would cost), so the plan does not empty the BESS for nothing.
"""

from __future__ import annotations

import numpy as np

from iquitos_lightning.control.objective_lp import Window, month_index, solve_window
from iquitos_lightning.control.references import socket_arrays, state_bands
from iquitos_lightning.envs.actions import power_to_action
from iquitos_lightning.envs.objectives import TARIFF, TariffWeights, check_objective, peak_window_steps
from iquitos_lightning.envs.reward import RewardScales, RewardWeights
from iquitos_lightning.envs.state import SiteState
from iquitos_lightning.site.forecasts import PAST_DAYS, forecast_table
from iquitos_lightning.site.series import SiteSeries

HORIZON_H = 24
FORECASTS = ("perfect", "forecast")


def session_arrays(series: SiteSeries) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(arrival step, departure step, socket, energy needed kWh) of every EV session of ``series``: what an MPC plans
    a session with."""
    sessions = series.sessions
    return (
        sessions["arrival_step"].to_numpy(dtype=int),
        sessions["departure_step"].to_numpy(dtype=int),
        sessions["socket"].to_numpy(dtype=int),
        series.session_energy_needed_kwh(),
    )


class MPCController:
    """Receding-horizon LP of ``objective`` with ``perfect`` or realistic (``forecast``) forecasts."""

    def __init__(self, series: SiteSeries, objective: str, forecast: str = "perfect", horizon: int = HORIZON_H) -> None:
        if forecast not in FORECASTS:
            raise ValueError(f"forecast must be one of {FORECASTS}, got {forecast!r}")
        self.series = series
        self.config = series.config
        self.objective = check_objective(objective)
        self.forecast = forecast
        self.horizon = horizon
        self.name = f"mpc_{forecast}"
        self.charger_kw, self.battery_kwh = socket_arrays(self.config)
        self.scales = RewardScales.for_series(series)
        self.in_peak = peak_window_steps(self.config, series.hours)
        self.month = month_index(self.config, series.hours)
        self.arrival, self.departure, self.socket, self.need = session_arrays(series)
        # [T, horizon - 1] the later hours of each hour's window as the agents see them (None: perfect, the truth)
        ahead = np.arange(1, horizon)
        self.pv_ahead = forecast_table(series.pv_kw, ahead, PAST_DAYS) if forecast == "forecast" else None
        self.mall_ahead = forecast_table(series.mall_kw, ahead, PAST_DAYS) if forecast == "forecast" else None
        self.solve_seconds = 0.0
        self.solves = 0

    def _profile(self, values: np.ndarray, ahead: np.ndarray | None, now: float, t: int, hours: int) -> np.ndarray:
        if ahead is None:  # perfect: the true values
            return values[t : t + hours]
        return np.concatenate([[now], ahead[t, : hours - 1]])

    def _planned_pv_and_mall(self, state: SiteState, t: int, hours: int) -> tuple[np.ndarray, np.ndarray]:
        """[hours] PV and mall load the window plans with: this hour's observed, the later ones forecast."""
        pv = self._profile(self.series.pv_kw, self.pv_ahead, state.pv_kw, t, hours)
        mall = self._profile(self.series.mall_kw, self.mall_ahead, state.mall_kw, t, hours)
        return pv, mall

    def _coming_sessions(self, t: int, hours: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """EV sessions that arrive after hour ``t`` inside the window, as (socket, start, end, need kWh) with start
        and end in window hours: the true ones with ``perfect`` forecasts, none with ``forecast``."""
        if self.forecast != "perfect":
            empty = np.zeros(0, dtype=int)
            return empty, empty, empty, np.zeros(0)
        coming = np.flatnonzero((self.arrival > t) & (self.arrival < t + hours))
        return self.socket[coming], self.arrival[coming] - t, self.departure[coming] - t, self.need[coming]

    def act(self, state: SiteState) -> np.ndarray:
        t = state.time_step
        hours = min(self.horizon, self.series.hours - t)
        connected = np.flatnonzero(state.socket_connected)
        left = state.socket_hours_to_departure[connected].astype(int)
        need_now = (
            np.clip(state.socket_required_soc - state.socket_soc, 0.0, None)[connected] * self.battery_kwh[connected]
        )
        coming = self._coming_sessions(t, hours)
        socket, start, end, need = (
            np.concatenate([now, later])
            for now, later in zip((connected, np.zeros(len(connected), dtype=int), left, need_now), coming, strict=True)
        )
        charger = self.charger_kw[socket]
        beyond = np.clip(end - hours, 0, None)
        need = np.clip(need - charger * beyond, 0.0, None)  # what full power after the horizon cannot do
        end = np.minimum(end, hours)
        months = self.month[t : t + hours]
        pv_kw, mall_kw = self._planned_pv_and_mall(state, t, hours)
        window = Window(
            pv_kw=pv_kw,
            mall_kw=mall_kw,
            price_per_kwh=self.series.price_per_kwh[t : t + hours],
            carbon_kg_per_kwh=self.series.carbon_intensity_kg_per_kwh[t : t + hours],
            in_peak_window=self.in_peak[t : t + hours],
            month=months,
            month_peak_so_far_kw={int(months[0]): float(state.peak_to_date_kw)},
            session_socket=socket,
            session_start=start,
            session_end=end,
            session_need_kwh=need,
            bess_energy_kwh=state.bess_soc * self.config.bess.capacity_kwh,
            sockets=self.config.ev.socket_count,
        )
        plan = solve_window(
            window,
            self.config,
            self.objective,
            charger_kw=self.charger_kw,
            reward_scales=self.scales,
            terminal_value=self._terminal_value(window),
        )
        self.solve_seconds += plan.solve_seconds
        self.solves += 1
        bands = state_bands(state, self.charger_kw, self.battery_kwh)
        bess_kw = plan.bess_charge_kw[0] - plan.bess_discharge_kw[0]
        bess = np.clip(bess_kw / self.config.bess.power_kw, -1.0, 1.0)
        return np.concatenate([[bess], power_to_action(plan.socket_kw[0], bands)])

    def _terminal_value(self, window: Window) -> float:
        """Per kWh left in the BESS: the cheapest import of the horizon (in objective units) x efficiency."""
        if self.objective == TARIFF:
            per_kwh = window.price_per_kwh + TariffWeights().co2_price_per_kg * window.carbon_kg_per_kwh
        else:
            weights, scales = RewardWeights(), self.scales
            per_kwh = (
                weights.co2 * window.carbon_kg_per_kwh / (scales.max_import_kw * scales.max_carbon)
                + weights.cost * window.price_per_kwh / (scales.max_import_kw * scales.max_price)
            ) / weights.total
        return float(per_kwh.min()) * self.config.bess.one_way_efficiency
