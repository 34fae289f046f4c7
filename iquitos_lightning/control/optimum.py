"""The perfect-foresight optimum: one linear program over the whole episode (scipy's HiGHS).

Why an LP: with the BESS modelled at a constant one-way efficiency sqrt(round trip), no capacity
fade and flat power limits (how the site builder configures CityLearn), the site's physics is
linear, so the year's best dispatch is an LP that HiGHS solves exactly. Its CO2 is the lower
bound no controller can beat with the same data; its plan, replayed through CityLearn as actions,
checks that the LP and the simulator agree.

The model, hour ``t`` (powers are hourly means, so kW = kWh):
- balance: pv + import + discharge = mall + sum(EV power) + charge + export (export >= 0 is
  also curtailment, and earns nothing);
- BESS: energy[t] = energy[t-1] + eta * charge[t] - discharge[t] / eta, eta = sqrt(round trip),
  energy in [soc_min, soc_max] x capacity, charge and discharge in [0, power], energy[-1] =
  initial SOC; the end state is free (a true lower bound: the plan may end the year emptier);
- EV: one variable per (session, hour) while the session is connected, in [0, charger kW]; each
  session receives exactly the battery-side energy it needs, ``charger_efficiency`` x grid-side
  energy; an ``unmet`` slack per session, priced far above any CO2, keeps infeasible data
  solvable and reports what could not be served;
- objective: CO2 (imports x intensity) first; cost (imports x price) times ``cost_weight`` breaks
  ties (a constant intensity makes many plans equal in CO2); a negligible charge on BESS
  throughput stops the solver from charging and discharging in the same hour, which the
  simulator's single BESS action could not replay.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse

from iquitos_lightning.envs.import_limit import usable_import_kw
from iquitos_lightning.fastpath import highs_lp
from iquitos_lightning.metrics.flows import DEPARTURE_COLUMNS, FLOW_COLUMNS
from iquitos_lightning.site.series import SiteSeries

# Objective weight of cost relative to CO2: small enough never to trade CO2 for money.
DEFAULT_COST_WEIGHT = 1e-3
# Objective weight per kWh of BESS throughput: only a tie-breaker against simultaneous charge/discharge.
THROUGHPUT_WEIGHT = 1e-6
# Objective weight per kWh an EV leaves without: far above any kg of CO2 per kWh.
UNMET_PENALTY = 1e3


class OptimumError(RuntimeError):
    """HiGHS did not return an optimal solution; the message carries its status."""


@dataclass(frozen=True)
class LPSolution:
    """An optimal solution of one LP: the variables, the objective value, the seconds HiGHS took."""

    x: np.ndarray
    objective: float
    seconds: float


def solve_lp(
    cost: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    a_ub: sparse.spmatrix | None = None,
    b_ub: np.ndarray | None = None,
    a_eq: sparse.spmatrix | None = None,
    b_eq: np.ndarray | None = None,
) -> LPSolution:
    """``min cost @ x`` under the constraints and the bounds ``[lower, upper]``, by HiGHS (scipy's, called as
    ``linprog(method="highs")`` calls it: fastpath/highs_lp.py), timed; :class:`OptimumError` unless it is solved to
    optimality (both LPs of control/ solve through here)."""
    started = time.perf_counter()
    try:
        x, objective = highs_lp.solve(cost, lower, upper, a_ub, b_ub, a_eq, b_eq)
    except highs_lp.HighsFailed as failure:
        raise OptimumError(str(failure)) from None
    return LPSolution(x, float(objective), time.perf_counter() - started)


@dataclass
class OptimumPlan:
    """The LP's hourly plan and what it claims (before replay through the simulator)."""

    grid_import_kw: np.ndarray  # [T]
    grid_export_kw: np.ndarray  # [T], export or curtailment
    bess_charge_kw: np.ndarray  # [T], grid side
    bess_discharge_kw: np.ndarray  # [T], grid side
    bess_soc: np.ndarray  # [T], fraction of capacity at the end of each hour
    socket_kw: np.ndarray  # [T, S], grid-side charging power per socket
    session_delivered_kwh: np.ndarray  # [N], battery side, in series.sessions row order
    session_unmet_kwh: np.ndarray  # [N]
    objective: float  # the LP objective value (CO2 kg + tie-breakers)
    co2_kg: float  # imports x intensity of the plan
    cost: float  # imports x price of the plan
    solve_seconds: float
    variables: int
    constraints: int

    def actions(self, series: SiteSeries) -> np.ndarray:
        """The plan as environment actions [T, 1 + S]: BESS net power then socket power, as fractions."""
        bess_power = series.config.bess.power_kw
        bess_action = (self.bess_charge_kw - self.bess_discharge_kw) / bess_power
        socket_action = self.socket_kw / series.socket_charger_kw[None, :]
        return np.clip(np.column_stack([bess_action, socket_action]), -1.0, 1.0)

    def flows(self, series: SiteSeries) -> pd.DataFrame:
        """The plan's own energy flows, in the environment's flow-table layout."""
        table = pd.DataFrame(
            {
                "pv_kw": series.pv_kw,
                "mall_kw": series.mall_kw,
                "ev_kw": self.socket_kw.sum(axis=1),
                "bess_charge_kw": self.bess_charge_kw,
                "bess_discharge_kw": self.bess_discharge_kw,
                "grid_import_kw": self.grid_import_kw,
                "grid_export_kw": self.grid_export_kw,
                "bess_soc": self.bess_soc,
                "price_per_kwh": series.price_per_kwh,
                "carbon_intensity_kg_per_kwh": series.carbon_intensity_kg_per_kwh,
            }
        )
        return table[list(FLOW_COLUMNS)]

    def departures(self, series: SiteSeries) -> pd.DataFrame:
        """The plan's departures, in the environment's departure-table layout."""
        sessions = series.sessions
        battery = series.socket_battery_kwh[sessions["socket"].to_numpy(dtype=int)]
        departure_soc = sessions["arrival_soc"].to_numpy(dtype=float) + self.session_delivered_kwh / battery
        table = pd.DataFrame(
            {
                "socket": sessions["socket"].to_numpy(dtype=int),
                "departure_step": sessions["departure_step"].to_numpy(dtype=int),
                "required_soc": sessions["required_soc"].to_numpy(dtype=float),
                "departure_soc": departure_soc,
                "energy_delivered_kwh": self.session_delivered_kwh,
                "unmet_kwh": self.session_unmet_kwh,
            }
        )
        return table[list(DEPARTURE_COLUMNS)]


def solve_optimum(
    series: SiteSeries,
    *,
    charger_efficiency: float = 1.0,
    cost_weight: float = DEFAULT_COST_WEIGHT,
) -> OptimumPlan:
    """Solve the perfect-foresight LP of ``series`` (model in the module docstring)."""
    hours = series.hours
    bess = series.config.bess
    eta = bess.one_way_efficiency
    sessions = series.sessions
    session_count = len(sessions)
    need_kwh = series.session_energy_needed_kwh() if session_count else np.zeros(0)

    # Session-hour pairs: one EV variable per hour a session is plugged in.
    arrival = sessions["arrival_step"].to_numpy(dtype=int)
    departure = np.minimum(sessions["departure_step"].to_numpy(dtype=int), hours)
    dwell = np.clip(departure - arrival, 0, None)
    pair_session = np.repeat(np.arange(session_count), dwell)
    pair_hour = np.repeat(arrival, dwell) + _ranges(dwell)
    pair_socket = sessions["socket"].to_numpy(dtype=int)[pair_session]
    pair_count = len(pair_session)

    # Variable layout: five hourly blocks, then session-hours, then one unmet slack per session.
    imp, exp, chg, dis, energy = (np.arange(hours) + block * hours for block in range(5))
    pair_offset = 5 * hours
    unmet_offset = pair_offset + pair_count
    variable_count = unmet_offset + session_count
    pair_vars = pair_offset + np.arange(pair_count)
    unmet_vars = unmet_offset + np.arange(session_count)
    hour_rows = np.arange(hours)

    # Hourly balance: import - export - charge + discharge - sum(EV) = mall - pv.
    balance = _coo(
        rows=[hour_rows, hour_rows, hour_rows, hour_rows, pair_hour],
        cols=[imp, exp, chg, dis, pair_vars],
        vals=[1.0, -1.0, -1.0, 1.0, -1.0],
        sizes=[hours, hours, hours, hours, pair_count],
        shape=(hours, variable_count),
    )
    balance_rhs = series.mall_kw - series.pv_kw

    # BESS energy: energy[t] - energy[t-1] - eta charge[t] + discharge[t] / eta = 0 (t=0: = initial).
    soc_rows = np.arange(hours)
    dynamics = _coo(
        rows=[soc_rows, soc_rows[1:], soc_rows, soc_rows],
        cols=[energy, energy[:-1], chg, dis],
        vals=[1.0, -1.0, -eta, 1.0 / eta],
        sizes=[hours, hours - 1, hours, hours],
        shape=(hours, variable_count),
    )
    dynamics_rhs = np.zeros(hours)
    dynamics_rhs[0] = bess.initial_soc * bess.capacity_kwh

    # Each session: charger_efficiency x sum(EV power) + unmet = energy needed (battery side).
    session_rows = np.arange(session_count)
    service = _coo(
        rows=[pair_session, session_rows],
        cols=[pair_vars, unmet_vars],
        vals=[charger_efficiency, 1.0],
        sizes=[pair_count, session_count],
        shape=(session_count, variable_count),
    )

    lower = np.zeros(variable_count)
    upper = np.full(variable_count, np.inf)
    upper[chg] = bess.power_kw
    upper[dis] = bess.power_kw
    upper[imp] = usable_import_kw(series.config.grid.import_limit_kw)  # the connection's limit
    lower[energy] = bess.soc_min * bess.capacity_kwh
    upper[energy] = bess.soc_max * bess.capacity_kwh
    upper[pair_vars] = series.socket_charger_kw[pair_socket]

    objective = np.zeros(variable_count)
    objective[imp] = series.carbon_intensity_kg_per_kwh + cost_weight * series.price_per_kwh
    objective[chg] = THROUGHPUT_WEIGHT
    objective[dis] = THROUGHPUT_WEIGHT
    objective[unmet_vars] = UNMET_PENALTY

    equality = sparse.vstack([balance, dynamics, service], format="csc")
    equality_rhs = np.concatenate([balance_rhs, dynamics_rhs, need_kwh])
    solution = solve_lp(objective, lower, upper, a_eq=equality, b_eq=equality_rhs)
    x = solution.x
    socket_kw = np.zeros((hours, len(series.socket_charger_kw)))
    np.add.at(socket_kw, (pair_hour, pair_socket), x[pair_vars])
    delivered = np.bincount(pair_session, weights=x[pair_vars], minlength=session_count) * charger_efficiency
    imports = np.clip(x[imp], 0.0, None)
    return OptimumPlan(
        grid_import_kw=imports,
        grid_export_kw=np.clip(x[exp], 0.0, None),
        bess_charge_kw=x[chg],
        bess_discharge_kw=x[dis],
        bess_soc=x[energy] / bess.capacity_kwh,
        socket_kw=socket_kw,
        session_delivered_kwh=delivered,
        session_unmet_kwh=x[unmet_vars],
        objective=solution.objective,
        co2_kg=float(imports @ series.carbon_intensity_kg_per_kwh),
        cost=float(imports @ series.price_per_kwh),
        solve_seconds=solution.seconds,
        variables=variable_count,
        constraints=equality.shape[0],
    )


def _ranges(lengths: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(n)`` for each n in ``lengths`` (the hour offset within each session)."""
    if len(lengths) == 0:
        return np.zeros(0, dtype=int)
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.arange(int(lengths.sum())) - starts


def _coo(
    rows: list[np.ndarray],
    cols: list[np.ndarray],
    vals: list[float],
    sizes: list[int],
    shape: tuple[int, int],
) -> sparse.coo_array:
    """A sparse block of constraint rows from parallel (rows, columns, constant value) groups."""
    data = np.concatenate([np.full(size, value) for value, size in zip(vals, sizes, strict=True)])
    return sparse.coo_array((data, (np.concatenate(rows), np.concatenate(cols))), shape=shape)
