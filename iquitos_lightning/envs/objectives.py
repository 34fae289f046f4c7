"""The objectives an agent can be trained on: the seeds' ``thesis`` reward and the ``tariff`` bill.

Why two: the seed weights (envs/reward.py) value CO2, PV use and EV service, and on this site a
rule-based controller is already within 0.3-0.5 % of their optimum; the money is in the bill a
medium-voltage customer really pays, which the seed reward barely sees:

``tariff`` (currency, per year) = energy cost (hourly import x time-of-use price)
  + demand charge (``grid.demand_charge_per_kw_month`` x, for each month, the largest hourly import
    inside the peak window ``[grid.peak_start_hour, grid.peak_end_hour)``)
  + CO2 at :attr:`TariffWeights.co2_price_per_kg` (a secondary term: a few % of the energy price).

Written as a step reward it stays Markovian with the month-to-date peak in the state: the hour
pays its energy and CO2, and in the peak window the demand charge on the amount by which it
raises the month's peak so far (``max(import - peak_to_date, 0)``); summed over a month that is
exactly the rate x the month's peak. The reward is minus that amount divided by a fixed scale
(largest possible import x highest price, so an ordinary hour is in [-1, 0]); an hour that raises
the month's peak costs far more, as the bill does. The return times ``-scale`` is the bill.

Like reward.py every function is array-generic: floats (CityLearn env), numpy arrays or torch
tensors (the twin), so both simulators compute the same numbers with the same code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from iquitos_lightning.envs.arrays import clip_value
from iquitos_lightning.envs.reward import RewardScales, Value
from iquitos_lightning.site.config import SiteConfig

THESIS = "thesis"
TARIFF = "tariff"
OBJECTIVES = (THESIS, TARIFF)


@dataclass
class TariffWeights:
    """The ``tariff`` objective's secondary CO2 price (currency per kg; 0.05 PEN/kg is about 13 USD/t)."""

    co2_price_per_kg: float = 0.05

    def __post_init__(self) -> None:
        if not (math.isfinite(self.co2_price_per_kg) and self.co2_price_per_kg >= 0):
            raise ValueError(f"co2_price_per_kg must be finite and >= 0, got {self.co2_price_per_kg!r}")


def check_objective(objective: str) -> str:
    if objective not in OBJECTIVES:
        raise ValueError(f"env.objective must be one of {OBJECTIVES}, got {objective!r}")
    return objective


def month_start_steps(site_config: SiteConfig, hours: int) -> np.ndarray:
    """[T] bool: the steps that open a calendar month (the month-to-date peak restarts at 0 there)."""
    times = pd.date_range(f"{site_config.calendar.year}-01-01", periods=hours, freq="h")
    month = times.month.to_numpy()
    return np.concatenate([[True], month[1:] != month[:-1]])


MONTH, DAY = "month", "day"
# How often the peak-to-date the demand charge bills restarts: "month" is the bill; "day" is a training surrogate
# (the same rate spread over the days: each day's own peak-window maximum is billed at rate x 12 / 365).
DEMAND_PERIODS = (MONTH, DAY)


def check_demand_period(period: str) -> str:
    if period not in DEMAND_PERIODS:
        raise ValueError(f"env.demand_period must be one of {DEMAND_PERIODS}, got {period!r}")
    return period


def demand_period_starts(site_config: SiteConfig, hours: int, period: str = MONTH) -> np.ndarray:
    """[T] bool: the steps where the billed peak-to-date restarts at 0 (a month's first hour, or each midnight)."""
    if check_demand_period(period) == DAY:
        return np.arange(hours) % 24 == 0
    return month_start_steps(site_config, hours)


def demand_rate_per_kw(site_config: SiteConfig, period: str = MONTH) -> float:
    """The demand charge per kW of one period's peak: the month's rate, or its share of a day (x 12 / 365)."""
    rate = site_config.grid.demand_charge_per_kw_month
    return rate * 12.0 / 365.0 if check_demand_period(period) == DAY else rate


def peak_window_steps(site_config: SiteConfig, hours: int) -> np.ndarray:
    """[T] bool: the steps inside the peak window, where imports set the demand charge."""
    hour = np.arange(hours) % 24
    grid = site_config.grid
    return (hour >= grid.peak_start_hour) & (hour < grid.peak_end_hour)


def tariff_amount(
    grid_import_kw: Value,
    price_per_kwh: Value,
    carbon_intensity_kg_per_kwh: Value,
    peak_to_date_kw: Value,
    in_peak_window: Value,
    demand_charge_per_kw_month: float,
    weights: TariffWeights,
) -> Value:
    """What one hour adds to the bill: energy + CO2 + the demand charge on the rise of the month's peak."""
    rise_kw = clip_value(grid_import_kw - peak_to_date_kw, 0.0) * in_peak_window
    energy = grid_import_kw * price_per_kwh
    co2 = grid_import_kw * carbon_intensity_kg_per_kwh * weights.co2_price_per_kg
    return energy + co2 + demand_charge_per_kw_month * rise_kw


def next_peak_to_date(grid_import_kw: Value, peak_to_date_kw: Value, in_peak_window: Value) -> Value:
    """The month-to-date peak after this hour (the caller restarts it at 0 when a month opens)."""
    raised = peak_to_date_kw + clip_value(grid_import_kw - peak_to_date_kw, 0.0)
    return raised * in_peak_window + peak_to_date_kw * (1 - in_peak_window)


def stored_energy_shaping(
    soc_before: Value, soc_after: Value, value_per_kwh: float, capacity_kwh: float, gamma: float, scale: float
) -> Value:
    """A potential-based shaping term (Ng, Harada & Russell 1999): ``(gamma x phi(s') - phi(s)) / scale`` with
    ``phi`` the value of the energy in the BESS (``value_per_kwh`` x SOC x capacity).

    Why: charging the battery at night for the evening pays back 10 to 18 hours later, and a critic early in
    training sees only the hour's energy bill, so the policy learns to empty the battery at once (measured: SAC
    with an import set-point action settled on a set-point of 0 in every hour). The shaping credits stored energy
    when it is stored and debits it when it is used; added to every step's reward with the agent's own discount, its sum
    over an episode is ``gamma^T phi(s_T) - phi(s_0)``, so it changes no policy's ranking (the optimum is the
    same), only how soon the critic sees the consequence. Evaluation KPIs and bills never include it.
    """
    value = value_per_kwh * capacity_kwh
    return (gamma * value * soc_after - value * soc_before) / scale


def shaping_scale(objective: str, tariff_scale: float, max_import_kw: float) -> float:
    """What :func:`stored_energy_shaping` divides by: the tariff reward's divisor, so that ``stored_energy_value`` is
    PEN per kWh; on ``thesis`` the site's largest possible import, so that it is in the thesis reward's units per kWh
    times that import (a kWh imported costs 0.50 in CO2 at the site's constant carbon intensity plus 0.15 x price /
    peak price in cost, ~0.63 off the peak window and ~0.69 in it with the grid term, at the seed weights)."""
    return tariff_scale if objective == TARIFF else max_import_kw


def tariff_scale(max_import_kw: float, max_price: float) -> float:
    """The fixed divisor of the tariff reward: an ordinary hour's bill is at most this."""
    return max(max_import_kw * max_price, 1e-9)


@dataclass(frozen=True)
class TariffReward:
    """The ``tariff`` objective's step reward, as both simulators compute it: minus what the hour adds to the
    bill (:func:`tariff_amount`) over the fixed :func:`tariff_scale`; array-generic like them."""

    demand_charge_per_kw: float  # per kW of the period's peak (demand_rate_per_kw: a month's, or a day's share)
    weights: TariffWeights
    scale: float

    @classmethod
    def for_site(
        cls,
        site_config: SiteConfig,
        reward_scales: RewardScales,
        weights: TariffWeights | None = None,
        demand_period: str = MONTH,
    ) -> TariffReward:
        scale = tariff_scale(reward_scales.max_import_kw, reward_scales.max_price)
        return cls(demand_rate_per_kw(site_config, demand_period), weights or TariffWeights(), scale)

    def __call__(
        self,
        grid_import_kw: Value,
        price_per_kwh: Value,
        carbon_intensity_kg_per_kwh: Value,
        peak_to_date_kw: Value,
        in_peak_window: Value,
    ) -> Value:
        amount = tariff_amount(
            grid_import_kw,
            price_per_kwh,
            carbon_intensity_kg_per_kwh,
            peak_to_date_kw,
            in_peak_window,
            self.demand_charge_per_kw,
            self.weights,
        )
        return -amount / self.scale


def monthly_bill(flows: pd.DataFrame, site_config: SiteConfig, weights: TariffWeights | None = None) -> pd.DataFrame:
    """The bill of :func:`tariff_bill` split by month: energy (imports x price), CO2 term, demand charge (that month's
    peak-window peak x rate) and their sum; one row per month (index 1..12 for a calendar year). Why: a year's
    single number hides whether a controller loses on energy or on one month's peak."""
    weights = weights or TariffWeights()
    imports = flows["grid_import_kw"].to_numpy(dtype=float)
    hours = len(imports)
    window = peak_window_steps(site_config, hours)
    month = np.cumsum(month_start_steps(site_config, hours)) - 1
    months = int(month.max(initial=-1)) + 1
    peaks = np.zeros(months)
    np.maximum.at(peaks, month[window], imports[window])
    energy = np.bincount(month, imports * flows["price_per_kwh"].to_numpy(dtype=float), minlength=months)
    co2 = np.bincount(month, imports * flows["carbon_intensity_kg_per_kwh"].to_numpy(dtype=float), minlength=months)
    table = pd.DataFrame(
        {
            "energy": energy,
            "co2_term": co2 * weights.co2_price_per_kg,
            "demand_charge": site_config.grid.demand_charge_per_kw_month * peaks,
            "peak_window_kw": peaks,
            "max_import_kw": np.maximum.reduceat(imports, np.flatnonzero(np.r_[True, np.diff(month) != 0])),
        },
        index=pd.RangeIndex(1, months + 1, name="month"),
    )
    table["bill"] = table["energy"] + table["co2_term"] + table["demand_charge"]
    return table


def tariff_bill(flows: pd.DataFrame, site_config: SiteConfig, weights: TariffWeights | None = None) -> dict[str, float]:
    """The year's bill from a flow table: energy, demand charge, CO2 term and their sum (``tariff_cost``)."""
    weights = weights or TariffWeights()
    imports = flows["grid_import_kw"].to_numpy(dtype=float)
    hours = len(imports)
    window = peak_window_steps(site_config, hours)
    month = np.cumsum(month_start_steps(site_config, hours)) - 1
    peaks = np.zeros(int(month.max(initial=-1)) + 1)
    np.maximum.at(peaks, month[window], imports[window])
    energy = float((imports * flows["price_per_kwh"].to_numpy(dtype=float)).sum())
    co2_kg = float((imports * flows["carbon_intensity_kg_per_kwh"].to_numpy(dtype=float)).sum())
    demand = float(site_config.grid.demand_charge_per_kw_month * peaks.sum())
    co2 = co2_kg * weights.co2_price_per_kg
    return {
        "demand_charge": demand,
        "peak_window_import_kw_mean_monthly": float(peaks.mean()) if len(peaks) else 0.0,
        "tariff_cost": energy + demand + co2,
    }
