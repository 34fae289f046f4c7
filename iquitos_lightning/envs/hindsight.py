"""Hindsight for the critic: the true coming hours of PV and mall load, which a training env knows and a site does not.

Why (asymmetric actor-critic, Pinto et al. 2018, "Asymmetric Actor Critic for Image-Based Robot Learning"): the
critic is used only in training, on simulated years whose future is known, while the actor is what a site deploys.
A critic that also sees the true coming hours explains the return's weather-driven swings that the actor's
forecasts cannot, so the actor learns from less noisy values; the actor still acts on what a site has
(``env.forecasts``, past-days forecasts by default). The values of a tomorrow the actor cannot see do not bias its
gradient: the coming weather does not depend on the action taken now.

``env.critic_forecasts: oracle`` makes the training twin add :data:`HINDSIGHT` next to ``observation``: the
observation's forecast columns (PV and mall at the coming hours it lists) with their true values, scaled as the
observation scales them. The agents' critics read it when the env has it (agents/networks.py); evaluation envs
never carry it, and the actor never reads it.
"""

from __future__ import annotations

import numpy as np

from iquitos_lightning.envs.reward import RewardScales
from iquitos_lightning.envs.site_tables import build_site_tables
from iquitos_lightning.site.forecasts import ORACLE
from iquitos_lightning.site.series import SiteSeries

HINDSIGHT = "hindsight"  # the tensordict key the training twin writes and critics read
CRITIC_FORECASTS = (None, ORACLE)  # env.critic_forecasts: None (the critic sees what the actor sees) or "oracle"
FORECAST_PREFIXES = ("pv_forecast_", "mall_forecast_")


def check_critic_forecasts(critic_forecasts: str | None) -> str | None:
    """``critic_forecasts`` if it is one of :data:`CRITIC_FORECASTS`, else a ValueError naming them."""
    if critic_forecasts not in CRITIC_FORECASTS:
        raise ValueError(f"env.critic_forecasts must be null or {ORACLE!r}, got {critic_forecasts!r}")
    return critic_forecasts


def forecast_columns(observation_names: list[str]) -> list[int]:
    """Positions of the PV and mall forecast columns in an observation (the columns the forecasts decide)."""
    return [index for index, name in enumerate(observation_names) if name.startswith(FORECAST_PREFIXES)]


def hindsight_table(
    series: SiteSeries, reward_scales: RewardScales, objective: str, demand_period: str, observation: str
) -> np.ndarray:
    """[T, K] float32: at every step, the true values of the observation's K forecast columns, scaled as the
    observation's (the same site tables built with ``oracle`` forecasts, those columns taken)."""
    tables = build_site_tables(series, reward_scales, objective, demand_period, observation, ORACLE)
    return np.ascontiguousarray(tables.exogenous[:, forecast_columns(tables.observation_names)], dtype=np.float32)
