"""One linear program for any stretch of hours and either objective: the year's optimum and each MPC step.

Why one builder: the perfect-foresight optimum of an objective and the receding-horizon MPC must solve
the same model of the same objective, or "gap closed" would compare different problems. The physics
is control/optimum.py's (balance, BESS at a constant one-way efficiency, one EV variable per
session-hour in [0, charger kW], a priced ``unmet`` slack per session); the objective is the agent's:

- ``tariff`` (currency): import x (price + CO2 price x intensity) + for each month in the window the
  demand rate x that month's peak import in the peak window (a variable above every such hour's
  import and above the peak already set this month);
- ``thesis`` (minus the seed reward, envs/reward.py): the CO2 and cost terms are linear in import;
  the solar term's ``max(PV - useful sinks, 0)`` is a slack above it; the grid term's
  ``(import / max import)^2`` is a variable above :data:`GRID_TANGENTS` tangent lines of the square (an
  under-estimate by at most (1 / 2 / (K - 1))^2 per hour); the EV term is a constant once EVs are served.

A terminal value per kWh left in the BESS (``terminal_value``) keeps a short horizon from emptying it
for nothing at its end; the year's LP uses none. Solved by scipy's HiGHS.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from iquitos_lightning.control.optimum import THROUGHPUT_WEIGHT, _ranges, solve_lp
from iquitos_lightning.envs.import_limit import usable_import_kw
from iquitos_lightning.envs.objectives import (
    TARIFF,
    THESIS,
    TariffWeights,
    check_objective,
    month_start_steps,
    peak_window_steps,
)
from iquitos_lightning.envs.reward import RewardScales, RewardWeights
from iquitos_lightning.site.config import SiteConfig
from iquitos_lightning.site.series import SiteSeries

GRID_TANGENTS = 17  # tangent points of (import / max import)^2 on [0, 1]
UNMET_PENALTY_PER_KWH = {TARIFF: 1e3, THESIS: 1.0}  # far above any hour's objective per kWh


@dataclass
class Window:
    """The hours an LP plans (``H``) and the EV sessions inside them (``N``)."""

    pv_kw: np.ndarray  # [H]
    mall_kw: np.ndarray  # [H]
    price_per_kwh: np.ndarray  # [H]
    carbon_kg_per_kwh: np.ndarray  # [H]
    in_peak_window: np.ndarray  # [H] bool
    month: np.ndarray  # [H] int: month index (peaks are per month)
    month_peak_so_far_kw: dict[int, float]  # peak already set in a month the window starts in
    session_socket: np.ndarray  # [N]
    session_start: np.ndarray  # [N] first hour (window index)
    session_end: np.ndarray  # [N] hour it has left by (exclusive, <= H)
    session_need_kwh: np.ndarray  # [N] battery-side energy to deliver inside the window
    bess_energy_kwh: float  # at the start of the window
    sockets: int


@dataclass
class WindowPlan:
    """The LP's hourly plan for the window."""

    grid_import_kw: np.ndarray
    bess_charge_kw: np.ndarray
    bess_discharge_kw: np.ndarray
    socket_kw: np.ndarray  # [H, S]
    session_unmet_kwh: np.ndarray
    objective: float
    solve_seconds: float
    variables: int


class ConstraintRows:
    """Constraint rows over ``columns`` variables, added block by block as (row, column, value) parts and stacked
    into one CSC matrix at the end.

    Why not a sparse matrix per block and ``scipy.sparse.vstack``: an MPC solves one LP an hour, each of ~20 blocks
    (17 tangent blocks under ``thesis``), and scipy's per-matrix checks cost more than HiGHS's solve of a day's
    window. The triplets are the ones vstack concatenates (each block's rows shifted below the blocks before it, in
    the same order), so the CSC matrix HiGHS gets is the same, array for array (tests/control/test_objective_lp.py).
    """

    def __init__(self, columns: int) -> None:
        self.columns = columns
        self.height = 0
        self._rows: list[np.ndarray] = []
        self._columns: list[np.ndarray] = []
        self._values: list[np.ndarray] = []

    def add(self, parts: list[tuple[np.ndarray, np.ndarray, float | np.ndarray]], height: int) -> None:
        """A block of ``height`` rows below the ones added so far: each part's rows (within the block), columns and
        value (one per entry, or one for all)."""
        for rows, columns, value in parts:
            self._rows.append(rows + self.height)
            self._columns.append(columns)
            self._values.append(np.broadcast_to(np.asarray(value, dtype=float), rows.shape))
        self.height += height

    def matrix(self) -> sparse.csc_array:
        """Every row added, as one CSC matrix [height, columns]."""
        triplets = (np.concatenate(self._values), (np.concatenate(self._rows), np.concatenate(self._columns)))
        return sparse.coo_array(triplets, shape=(self.height, self.columns)).tocsc()


def solve_window(
    window: Window,
    site_config: SiteConfig,
    objective: str,
    *,
    charger_kw: np.ndarray,
    reward_scales: RewardScales,
    reward_weights: RewardWeights | None = None,
    tariff_weights: TariffWeights | None = None,
    terminal_value: float = 0.0,
) -> WindowPlan:
    """The plan minimising ``objective`` over ``window`` (model in the module docstring)."""
    check_objective(objective)
    weights = reward_weights or RewardWeights()
    tariff = tariff_weights or TariffWeights()
    bess = site_config.bess
    eta = bess.one_way_efficiency
    hours = len(window.pv_kw)
    sessions = len(window.session_socket)
    dwell = np.clip(window.session_end - window.session_start, 0, None)
    pair_session = np.repeat(np.arange(sessions), dwell)
    pair_hour = np.repeat(window.session_start, dwell) + _ranges(dwell)
    pair_socket = window.session_socket[pair_session]
    pairs = len(pair_session)
    months = sorted(set(window.month[window.in_peak_window].tolist())) if objective == TARIFF else []
    thesis = objective == THESIS

    # Variables: imp, exp, chg, dis, energy [H]; (solar slack, grid square [H] for thesis); pairs; unmet; peaks.
    blocks = 7 if thesis else 5
    imp, exp, chg, dis, energy = (np.arange(hours) + b * hours for b in range(5))
    slack, square = (np.arange(hours) + 5 * hours, np.arange(hours) + 6 * hours) if thesis else (None, None)
    pair_vars = blocks * hours + np.arange(pairs)
    unmet_vars = blocks * hours + pairs + np.arange(sessions)
    peak_vars = blocks * hours + pairs + sessions + np.arange(len(months))
    count = blocks * hours + pairs + sessions + len(months)
    rows = np.arange(hours)

    equalities = ConstraintRows(count)
    equalities.add(  # balance
        [(rows, imp, 1.0), (rows, exp, -1.0), (rows, chg, -1.0), (rows, dis, 1.0), (pair_hour, pair_vars, -1.0)], hours
    )
    equalities.add(  # BESS dynamics
        [(rows, energy, 1.0), (rows[1:], energy[:-1], -1.0), (rows, chg, -eta), (rows, dis, 1.0 / eta)], hours
    )
    dynamics_rhs = np.zeros(hours)
    dynamics_rhs[0] = window.bess_energy_kwh
    equalities.add([(pair_session, pair_vars, 1.0), (np.arange(sessions), unmet_vars, 1.0)], sessions)  # service
    a_eq = equalities.matrix()
    b_eq = np.concatenate([window.mall_kw - window.pv_kw, dynamics_rhs, window.session_need_kwh])

    lower = np.zeros(count)
    upper = np.full(count, np.inf)
    upper[chg] = upper[dis] = bess.power_kw
    upper[imp] = usable_import_kw(site_config.grid.import_limit_kw)  # the connection's limit
    lower[energy] = bess.soc_min * bess.capacity_kwh
    upper[energy] = bess.soc_max * bess.capacity_kwh
    upper[pair_vars] = charger_kw[pair_socket]
    cost = np.zeros(count)
    cost[chg] = cost[dis] = THROUGHPUT_WEIGHT
    cost[unmet_vars] = UNMET_PENALTY_PER_KWH[objective]
    cost[energy[-1]] -= terminal_value
    inequalities, b_ub = ConstraintRows(count), []
    if objective == TARIFF:
        cost[imp] = window.price_per_kwh + tariff.co2_price_per_kg * window.carbon_kg_per_kwh
        rate = site_config.grid.demand_charge_per_kw_month
        for index, month in enumerate(months):
            hours_in = np.flatnonzero(window.in_peak_window & (window.month == month))
            inequalities.add(
                [
                    (np.arange(len(hours_in)), imp[hours_in], 1.0),
                    (np.arange(len(hours_in)), np.full(len(hours_in), peak_vars[index]), -1.0),
                ],
                len(hours_in),
            )
            b_ub.append(np.zeros(len(hours_in)))
            lower[peak_vars[index]] = window.month_peak_so_far_kw.get(month, 0.0)
            cost[peak_vars[index]] = rate
    else:
        scales, total = reward_scales, weights.total
        cost[imp] = (
            weights.co2 * window.carbon_kg_per_kwh / (scales.max_import_kw * scales.max_carbon)
            + weights.cost * window.price_per_kwh / (scales.max_import_kw * scales.max_price)
        ) / total
        cost[slack] = weights.solar / scales.pv_max_kw / total
        cost[square] = weights.grid / total
        # slack >= pv - mall - sum(EV) - charge
        inequalities.add([(rows, slack, -1.0), (rows, chg, -1.0), (pair_hour, pair_vars, -1.0)], hours)
        b_ub.append(window.mall_kw - window.pv_kw)
        # square >= 2 x_k u - x_k^2 with u = import / max import
        for x in np.linspace(0.0, 1.0, GRID_TANGENTS):
            inequalities.add([(rows, imp, 2.0 * x / scales.max_import_kw), (rows, square, -1.0)], hours)
            b_ub.append(np.full(hours, x * x))
    a_ub = inequalities.matrix() if b_ub else None
    b_ub_all = np.concatenate(b_ub) if b_ub else None
    solution = solve_lp(cost, lower, upper, a_ub=a_ub, b_ub=b_ub_all, a_eq=a_eq, b_eq=b_eq)
    x = solution.x
    socket_kw = np.zeros((hours, window.sockets))
    np.add.at(socket_kw, (pair_hour, pair_socket), x[pair_vars])
    return WindowPlan(
        grid_import_kw=np.clip(x[imp], 0.0, None),
        bess_charge_kw=x[chg],
        bess_discharge_kw=x[dis],
        socket_kw=socket_kw,
        session_unmet_kwh=x[unmet_vars],
        objective=solution.objective,
        solve_seconds=solution.seconds,
        variables=count,
    )


def month_index(site_config: SiteConfig, hours: int) -> np.ndarray:
    """[T] month index of every step (0 = the first month)."""
    return np.cumsum(month_start_steps(site_config, hours)) - 1


def year_window(series: SiteSeries) -> Window:
    """The whole episode as one window, from the reset state (the perfect-foresight optimum)."""
    config = series.config
    sessions = series.sessions
    hours = series.hours
    return Window(
        pv_kw=series.pv_kw,
        mall_kw=series.mall_kw,
        price_per_kwh=series.price_per_kwh,
        carbon_kg_per_kwh=series.carbon_intensity_kg_per_kwh,
        in_peak_window=peak_window_steps(config, hours),
        month=month_index(config, hours),
        month_peak_so_far_kw={},
        session_socket=sessions["socket"].to_numpy(dtype=int),
        session_start=sessions["arrival_step"].to_numpy(dtype=int),
        session_end=np.minimum(sessions["departure_step"].to_numpy(dtype=int), hours),
        session_need_kwh=series.session_energy_needed_kwh(),
        bess_energy_kwh=config.bess.initial_soc * config.bess.capacity_kwh,
        sockets=config.ev.socket_count,
    )


def solve_year(series: SiteSeries, objective: str) -> WindowPlan:
    """The perfect-foresight optimum of ``objective`` over the whole episode."""
    return solve_window(
        year_window(series),
        series.config,
        objective,
        charger_kw=series.socket_charger_kw,
        reward_scales=RewardScales.for_series(series),
    )
