"""The multi-objective reward of the Iquitos site: one function per term, weights from config.

Why one function per term: each term is a physical quantity divided by a fixed scale of the site
(so it stays in about [-1, 1] per hour whatever the site's size), and each can be read, tested
and logged alone. The step reward is the weighted MEAN of the terms (weights / their sum), so it
stays in about [-1, 1] too. No term pays for waste: EV energy counts only up to what the EV still
needs, PV counts as used only when it meets a useful sink, and importing costs CO2 and money
whatever it feeds (charging the BESS from the grid for nothing is pure loss).

Every term is array-generic: the fields of :class:`StepOutcome` may be Python floats (the
CityLearn env, one step), numpy arrays or torch tensors (the batched twin, one value per env), so
the twin computes its reward with these very functions instead of a copy of the formulas.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from iquitos_lightning.envs.arrays import clip_value
from iquitos_lightning.site.series import SiteSeries

# A float, a numpy array or a torch tensor: the terms below use only arithmetic and clip_value.
Value = Any


@dataclass
class RewardWeights:
    """Weight of each term (the seed configuration, docs/site.md); validated: finite, non-negative, sum > 0."""

    co2: float = 0.50
    cost: float = 0.15
    solar: float = 0.20
    ev: float = 0.10
    grid: float = 0.05

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"reward weight {name} must be finite and >= 0, got {value!r}")
        if self.total <= 0:
            raise ValueError("reward weights must not all be zero")

    @property
    def total(self) -> float:
        return self.co2 + self.cost + self.solar + self.ev + self.grid


@dataclass
class RewardScales:
    """Fixed per-site scales that bring each term to about [-1, 1] per hour."""

    max_import_kw: float  # largest import physically possible: mall max + all sockets + BESS power
    pv_max_kw: float  # the inverter AC limit
    max_price: float
    max_carbon: float
    ev_power_kw: float  # all sockets at full power
    # the mall's largest hourly load: the observation's mall columns are divided by it (a constant of the site's
    # reported year, so that every training year of a multi-year twin is seen on the same scale)
    mall_max_kw: float = 1.0

    @classmethod
    def for_series(cls, series: SiteSeries) -> RewardScales:
        config = series.config
        ev_power = float(series.socket_charger_kw.sum())
        return cls(
            max_import_kw=float(series.mall_kw.max()) + ev_power + config.bess.power_kw,
            pv_max_kw=config.pv.ac_limit_kw,
            max_price=max(float(series.price_per_kwh.max()), 1e-9),
            max_carbon=max(float(series.carbon_intensity_kg_per_kwh.max()), 1e-9),
            ev_power_kw=max(ev_power, 1e-9),
            mall_max_kw=max(float(series.mall_kw.max()), 1e-9),
        )


@dataclass
class StepOutcome:
    """What one hour did, as the reward needs it (kW = kWh for hourly steps); floats or one value per env."""

    grid_import_kw: Value
    pv_kw: Value
    mall_kw: Value
    bess_charge_kw: Value
    ev_useful_kwh: Value  # grid-side EV energy that was still needed to reach the required SOCs
    departing_unmet_kwh: Value  # battery-side energy missing for the EVs that leave after this hour
    price_per_kwh: Value
    carbon_intensity_kg_per_kwh: Value


def co2_term(outcome: StepOutcome, scales: RewardScales) -> Value:
    """-(import x carbon intensity) / (max import x max intensity): in [-1, 0]; export never counts."""
    return -outcome.grid_import_kw * outcome.carbon_intensity_kg_per_kwh / (scales.max_import_kw * scales.max_carbon)


def cost_term(outcome: StepOutcome, scales: RewardScales) -> Value:
    """-(import x price) / (max import x max price): in [-1, 0]; export earns nothing."""
    return -outcome.grid_import_kw * outcome.price_per_kwh / (scales.max_import_kw * scales.max_price)


def solar_term(outcome: StepOutcome, scales: RewardScales) -> Value:
    """-(PV not absorbed by a useful sink) / PV AC limit: in [-1, 0].

    Useful sinks are the mall, the EV energy still needed and the BESS charge; PV pushed into EVs
    beyond their required SOC, or exported, is wasted and counts against.
    """
    useful_sink = outcome.mall_kw + outcome.ev_useful_kwh + outcome.bess_charge_kw
    return -clip_value(outcome.pv_kw - useful_sink, 0.0) / scales.pv_max_kw


def ev_term(outcome: StepOutcome, scales: RewardScales) -> Value:
    """(needed EV energy delivered - energy missing at departure) / all sockets' power: about [-1, 1].

    Charging beyond the required SOC adds nothing; an EV leaving short costs its whole gap once.
    """
    value = (outcome.ev_useful_kwh - outcome.departing_unmet_kwh) / scales.ev_power_kw
    return clip_value(value, -1.0, 1.0)


def grid_term(outcome: StepOutcome, scales: RewardScales) -> Value:
    """-(import / max import)^2: in [-1, 0]; quadratic, so flattening import peaks pays most."""
    return -((outcome.grid_import_kw / scales.max_import_kw) ** 2)


REWARD_TERMS = {"co2": co2_term, "cost": cost_term, "solar": solar_term, "ev": ev_term, "grid": grid_term}


def reward_terms(outcome: StepOutcome, scales: RewardScales) -> dict[str, Value]:
    """Every term's value for one step (before weighting)."""
    return {name: term(outcome, scales) for name, term in REWARD_TERMS.items()}


def weighted_reward(terms: dict[str, Value], weights: RewardWeights) -> Value:
    """The weighted mean of the terms: sum(w_i x term_i) / sum(w_i)."""
    return sum(getattr(weights, name) * value for name, value in terms.items()) / weights.total
