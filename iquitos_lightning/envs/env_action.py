"""The action an env applies: the agent's action turned into its layout's physical ``[BESS, sockets...]`` command.

Why one function: the CityLearn env and the twin must turn a derived layout's action (``rule_residual``,
``grid_target``, ``self_consumption(_split, _window)``, ``shaver_residual``, ``flat_rule_residual``) into the same
``fleet`` action to the bit, so both call this with the hour's state; ``per_socket`` and ``fleet`` actions pass
through unchanged.
"""

from __future__ import annotations

from iquitos_lightning.envs.actions import (
    FLAT_RULE_RESIDUAL,
    GRID_TARGET,
    RULE_RESIDUAL,
    SELF_CONSUMPTION,
    SELF_CONSUMPTION_SPLIT,
    SELF_CONSUMPTION_WINDOW,
    SHAVER_RESIDUAL,
    Array,
    SocketBands,
)
from iquitos_lightning.envs.grid_target import grid_target_fleet_action
from iquitos_lightning.envs.rule_prior import add_rule
from iquitos_lightning.envs.self_consumption import (
    self_consumption_fleet_action,
    split_self_consumption_fleet_action,
    window_self_consumption_fleet_action,
)
from iquitos_lightning.envs.shaver_prior import add_shaver
from iquitos_lightning.site.config import BatteryConfig


def applied_action(
    layout: str,
    action: Array,
    *,
    pv_kw: Array,
    mall_kw: Array,
    bands: SocketBands,
    bess_soc: Array,
    in_peak_window: Array,
    bess: BatteryConfig,
    max_import_kw: float,
    import_centre_kw: float,
    window_rest_kw: Array | None = None,
    window_rest_open: Array | None = None,
    idle_band: float = 0.0,
) -> Array:
    """The action [..., A] in the ``per_socket``/``fleet`` sense for an agent's action [..., A] (clipped to [-1, 1]).

    ``max_import_kw``/``import_centre_kw``: the ``grid_target`` set-points of actions +1 and 0 (envs/grid_target.py).

    ``window_rest_kw``/``window_rest_open``: the hour's rows of the site tables' forecasts of the rest of the peak
    window (``shaver_residual`` and ``flat_rule_residual`` only).

    ``idle_band``: the BESS actions within it of 0 idle (the ``self_consumption`` layouts, envs/self_consumption.py).
    """
    if layout == RULE_RESIDUAL:
        return add_rule(action, pv_kw, mall_kw, bands, bess_soc, in_peak_window, bess)
    if layout in (SHAVER_RESIDUAL, FLAT_RULE_RESIDUAL):
        rule_outside = layout == FLAT_RULE_RESIDUAL
        window = (window_rest_kw, window_rest_open)
        return add_shaver(
            action, pv_kw, mall_kw, bands, bess_soc, in_peak_window, *window, bess, rule_outside=rule_outside
        )
    if layout == GRID_TARGET:
        return grid_target_fleet_action(action, pv_kw, mall_kw, bands, bess, max_import_kw, import_centre_kw)
    if layout == SELF_CONSUMPTION:
        return self_consumption_fleet_action(action, pv_kw, mall_kw, bands, bess, idle_band)
    if layout == SELF_CONSUMPTION_SPLIT:
        return split_self_consumption_fleet_action(action, pv_kw, mall_kw, bands, bess, idle_band)
    if layout == SELF_CONSUMPTION_WINDOW:
        return window_self_consumption_fleet_action(action, pv_kw, mall_kw, bands, bess, in_peak_window, idle_band)
    return action
