"""The 2022 winning team's linear surrogate of the challenge score, as one LP over any horizon, solved by HiGHS.

Why this objective: the challenge score is a ratio of costs with maxima inside (peaks, load factors), not an LP. The
published perfect-foresight row (dvoitekh/mpc-gap-citylearn, after Tobi-Tob/CityLearn2022's method) minimises

    price term / its no-battery value + emission term / its no-battery value
        + 0.5 ramping term / its no-battery value + 0.5 load-factor term / its no-battery value

with price on the district's positive consumption, emissions on each building's, the ramp as the absolute change of
the district's consumption, and the load-factor term as each block's peak minus its mean (blocks of 730 hours over a
phase, one block over an MPC's window). Each no-battery value is taken on the same horizon plus 0.01, as published.
The battery is the LP's ideal one (a fixed efficiency both ways, a fixed power bound); CityLearn's own battery then
decides what a schedule really does, so every plan is scored by replaying it in CityLearn (``simulation.py``).

Units are the published LP's: energy as a fraction of the battery's 6.4 kWh capacity, actions included.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iquitos_lightning.control.objective_lp import ConstraintRows
from iquitos_lightning.fastpath import highs_lp

PUBLISHED_EFFICIENCY = 0.912  # the published LP's and MPC's one-way efficiency
PUBLISHED_MAX_RATE = 5.0 / 6.4  # 5 kW over a 6.4 kWh battery: the most a battery moves in an hour


@dataclass(frozen=True)
class Battery:
    """The LP's battery model: one-way efficiency and the most it charges or discharges in an hour (of capacity)."""

    efficiency: float = PUBLISHED_EFFICIENCY
    max_rate: float = PUBLISHED_MAX_RATE


def _baselines(net: np.ndarray, price: np.ndarray, carbon: np.ndarray, block: int, window_form: bool) -> np.ndarray:
    """The four no-battery values the terms are divided by (price, emissions, ramping, load factor)."""
    district = net.sum(axis=0)
    price_base = float(np.sum(np.clip(district, 0, None) * price)) + 0.01
    emission_base = float(np.sum(np.clip(net, 0, None).sum(axis=0) * carbon)) + 0.01
    ramping_base = float(np.sum(np.abs(np.diff(district)))) + 0.01
    if window_form:  # the published MPC: one block, its peak minus its mean
        load_factor_base = float(district.max() - district.mean()) + 0.01
    else:  # the published LP: 1 - mean/max summed over whole blocks (at least one), never below 0.01
        blocks = max(1, len(district) // block)
        total = 0.0
        for index in range(blocks):
            chunk = district[index * block : min((index + 1) * block, len(district))]
            total += 1 - chunk.mean() / chunk.max() if chunk.max() > 0 else 0.0
        load_factor_base = max(total, 0.01)
    return np.array([price_base, emission_base, ramping_base, load_factor_base])


def plan(
    net: np.ndarray,
    price: np.ndarray,
    carbon: np.ndarray,
    initial_soc: np.ndarray,
    battery: Battery = Battery(),
    block: int = 730,
    window_form: bool = False,
    interior_point: bool = False,
    smoothing: float = 0.0,
    previous_action: np.ndarray | None = None,
) -> np.ndarray:
    """The battery schedule (buildings, hours) minimising the surrogate, as fractions of capacity per hour.

    ``net``: each building's load minus PV over the horizon, as a fraction of the battery's capacity (buildings,
    hours). ``block``: the load-factor term's block length; the published LP counts only whole blocks
    (``hours // block``, at least one) and the hours past the last whole block in no block. ``window_form``: the
    published MPC's normalisation of the load-factor term (one block: the window). ``smoothing``: the published
    MPC's penalty on each building's action changes (``smoothing x |a[t] - a[t-1]|``, from ``previous_action`` at
    the first hour): it keeps a plan on an uncertain forecast from swinging the battery hour by hour.
    """
    buildings, hours = net.shape
    if price.shape != (hours,) or carbon.shape != (hours,) or initial_soc.shape != (buildings,):
        raise ValueError(
            f"plan: net {net.shape}, price {price.shape}, carbon {carbon.shape}, initial_soc {initial_soc.shape} "
            "do not match (buildings, hours)"
        )
    blocks = 1 if window_form else max(1, hours // block)
    block_of = np.minimum(np.arange(hours) // (hours if window_form else block), blocks - 1)
    in_block = np.arange(hours) < (hours if window_form else blocks * block)
    cells = buildings * hours
    # Columns: charge x, discharge y (both >= 0), soc, each building's positive consumption vu, the district's mu,
    # the ramp's absolute value w, each block's peak.
    x0, y0, soc0, vu0 = 0, cells, 2 * cells, 3 * cells
    mu0 = 4 * cells
    w0 = mu0 + hours
    peak0 = w0 + hours - 1
    smooth0 = peak0 + blocks  # |a[b,t] - a[b,t-1]| per cell, when smoothing
    columns = smooth0 + (cells if smoothing > 0 else 0)
    cell = np.arange(cells).reshape(buildings, hours)
    hour = np.arange(hours)
    price_base, emission_base, ramping_base, load_factor_base = _baselines(net, price, carbon, block, window_form)
    eff = battery.efficiency
    district = net.sum(axis=0)

    cost = np.zeros(columns)
    cost[vu0 : vu0 + cells] = np.tile(carbon, buildings) / emission_base
    cost[mu0 : mu0 + hours] = price / price_base
    cost[w0 : w0 + hours - 1] = 0.5 / ramping_base
    cost[peak0 : peak0 + blocks] = 0.5 / load_factor_base
    # minus 0.5 x each block's mean of the battery's part of the district (the data's part is a constant)
    block_sizes = np.bincount(block_of[in_block], minlength=blocks).astype(float)
    mean_weight = np.where(in_block, 0.5 / load_factor_base / block_sizes[block_of], 0.0)
    cost[x0 : x0 + cells] -= np.tile(mean_weight, buildings)
    cost[y0 : y0 + cells] += np.tile(mean_weight, buildings)

    lower = np.zeros(columns)
    upper = np.full(columns, np.inf)
    upper[x0 : y0 + cells] = battery.max_rate
    upper[soc0 : soc0 + cells] = 1.0
    lower[peak0 : peak0 + blocks] = -np.inf

    # soc[b,t] - soc[b,t-1] - eff x[b,t] + y[b,t] / eff = (initial soc at t = 0, else 0)
    equal = ConstraintRows(columns)
    flat = cell.ravel()
    previous = cell[:, 1:].ravel()
    equal.add(
        [
            (flat, soc0 + flat, 1.0),
            (previous, soc0 + previous - 1, -1.0),
            (flat, x0 + flat, -eff),
            (flat, y0 + flat, 1.0 / eff),
        ],
        cells,
    )
    b_eq = np.zeros(cells)
    b_eq[cell[:, 0]] = initial_soc

    below = ConstraintRows(columns)
    # vu[b,t] >= net + x - y
    below.add([(flat, x0 + flat, 1.0), (flat, y0 + flat, -1.0), (flat, vu0 + flat, -1.0)], cells)
    # mu[t] >= district + sum_b (x - y)
    by_hour = cell.T.ravel()  # hour-major: every building of hour 0, then of hour 1, ...
    hour_rows = np.repeat(hour, buildings)
    below.add([(hour_rows, x0 + by_hour, 1.0), (hour_rows, y0 + by_hour, -1.0), (hour, mu0 + hour, -1.0)], hours)
    # w[t] >= +-(battery change from t to t+1 + the data's change)
    steps = np.arange(hours - 1)
    step_rows = np.repeat(steps, buildings)
    after = cell[:, 1:].T.ravel()
    before = cell[:, :-1].T.ravel()
    for sign in (1.0, -1.0):
        below.add(
            [
                (step_rows, x0 + after, sign),
                (step_rows, y0 + after, -sign),
                (step_rows, x0 + before, -sign),
                (step_rows, y0 + before, sign),
                (steps, w0 + steps, -1.0),
            ],
            hours - 1,
        )
    # peak[block] >= district + sum_b (x - y), for the hours inside a block
    counted = hour[in_block]
    counted_rows = np.arange(len(counted))
    below.add(
        [
            (np.repeat(counted_rows, buildings), x0 + cell[:, counted].T.ravel(), 1.0),
            (np.repeat(counted_rows, buildings), y0 + cell[:, counted].T.ravel(), -1.0),
            (counted_rows, peak0 + block_of[counted], -1.0),
        ],
        len(counted),
    )
    change = np.diff(district)
    b_ub = np.concatenate([-net.ravel(), -district, -change, change, -district[in_block]])
    if smoothing > 0:  # s[b,t] >= +-(x - y)[b,t] -+ (x - y)[b,t-1] (the previous action at t = 0)
        cost[smooth0:] = smoothing
        start = np.zeros((buildings, hours))
        if previous_action is not None:
            start[:, 0] = previous_action
        later = cell[:, 1:].ravel()
        for sign in (1.0, -1.0):
            below.add(
                [
                    (flat, x0 + flat, sign),
                    (flat, y0 + flat, -sign),
                    (later, x0 + later - 1, -sign),
                    (later, y0 + later - 1, sign),
                    (flat, smooth0 + flat, -1.0),
                ],
                cells,
            )
            b_ub = np.concatenate([b_ub, sign * start.ravel()])
    solution, _ = highs_lp.solve(cost, lower, upper, below.matrix(), b_ub, equal.matrix(), b_eq, interior_point)
    return solution[x0 : x0 + cells].reshape(buildings, hours) - solution[y0 : y0 + cells].reshape(buildings, hours)
