"""Hindsight for the critic: the true coming hours of PV and mall load, which a training env knows and a site does not.

Why (asymmetric actor-critic, Pinto et al. 2018, "Asymmetric Actor Critic for Image-Based Robot Learning"): the
critic is used only in training, on simulated years whose future is known, while the actor is what a site deploys.
A critic that also sees the true coming hours explains the return's weather-driven swings that the actor's
forecasts cannot, so the actor learns from less noisy values; the actor still acts on what a site has
(``env.forecasts``, past-days forecasts by default). The values of a tomorrow the actor cannot see do not bias its
gradient: the coming weather does not depend on the action taken now.

``env.training.critic_forecasts: oracle`` makes the training twin add :data:`HINDSIGHT` next to ``observation``: the
true PV and mall load of each of the coming 24 hours, scaled as the observation scales them; first the observation's own
forecast columns in its order, then the hours it does not list (:func:`hindsight_names`). The agents' critics read it
when the env has it (agents/networks.py); evaluation envs never carry it, and the actor never reads it.

Why the whole day on every objective: the ``thesis`` observation forecasts 1-3 h ahead only, while what its
controllers trade is energy kept from the afternoon for the evening peak window, up to ten hours later; a critic
that saw only the observation's three hours would still read the evening's weather as noise. On ``tariff`` the
observation already lists 1-24 h, so its hindsight is those columns, unchanged.
"""

from __future__ import annotations

import numpy as np

from iquitos_lightning.envs.reward import RewardScales
from iquitos_lightning.envs.site_tables import forecast_scales
from iquitos_lightning.site.config import HOURS_PER_DAY
from iquitos_lightning.site.forecasts import ORACLE, forecast_table
from iquitos_lightning.site.series import SiteSeries

HINDSIGHT = "hindsight"  # the tensordict key the training twin writes and critics read
CRITIC_FORECASTS = (
    None,
    ORACLE,
)  # env.training.critic_forecasts: None (the critic sees what the actor sees) or "oracle"
FORECAST_SERIES = ("pv", "mall")  # the series whose coming hours the forecasts decide
FORECAST_PREFIXES = tuple(f"{name}_forecast_" for name in FORECAST_SERIES)


def check_critic_forecasts(critic_forecasts: str | None) -> str | None:
    """``critic_forecasts`` if it is one of :data:`CRITIC_FORECASTS`, else a ValueError naming them."""
    if critic_forecasts not in CRITIC_FORECASTS:
        raise ValueError(f"env.training.critic_forecasts must be null or {ORACLE!r}, got {critic_forecasts!r}")
    return critic_forecasts


def forecast_columns(observation_names: list[str]) -> list[int]:
    """Positions of the PV and mall forecast columns in an observation (the columns the forecasts decide)."""
    return [index for index, name in enumerate(observation_names) if name.startswith(FORECAST_PREFIXES)]


def hindsight_names(observation_names: list[str]) -> list[str]:
    """The hindsight's columns: the observation's forecast columns in its order, then PV and mall at the hours
    1-24 ahead that the observation does not list."""
    listed = [observation_names[index] for index in forecast_columns(observation_names)]
    day = [f"{name}_forecast_{ahead}" for name in FORECAST_SERIES for ahead in range(1, HOURS_PER_DAY + 1)]
    return listed + [name for name in day if name not in listed]


def hindsight_table(series: SiteSeries, reward_scales: RewardScales, observation_names: list[str]) -> np.ndarray:
    """[T, K] float32: at every step, the true values of :func:`hindsight_names`' K columns, scaled as the
    observation scales them (:func:`~iquitos_lightning.envs.site_tables.forecast_scales`)."""
    scales = forecast_scales(series, reward_scales)
    values = {"pv": series.pv_kw, "mall": series.mall_kw}
    columns = []
    for name in hindsight_names(observation_names):
        kind, ahead = name.split("_forecast_")
        columns.append(forecast_table(values[kind], [int(ahead)], ORACLE)[:, 0] / scales[kind])
    return np.ascontiguousarray(np.column_stack(columns), dtype=np.float32)
