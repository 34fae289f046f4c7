"""The action an env applies: the agent's action turned into its layout's physical ``[BESS, sockets...]`` command.

Why one function: the CityLearn env and the twin must turn a derived layout's action (``rule_residual``,
``self_consumption_window``, ``shaver_residual``) into the same ``fleet`` action to the bit, so both call this with
the hour's state; ``per_socket`` and ``fleet`` actions pass through unchanged.
"""

from __future__ import annotations

from iquitos_lightning.envs.actions import RULE_RESIDUAL, SELF_CONSUMPTION_WINDOW, SHAVER_RESIDUAL, Array, SocketBands
from iquitos_lightning.envs.rule_prior import add_rule
from iquitos_lightning.envs.self_consumption import window_self_consumption_fleet_action
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
    window_rest_kw: Array | None = None,
    window_rest_open: Array | None = None,
    idle_band: float = 0.0,
) -> Array:
    """The action [..., A] in the ``per_socket``/``fleet`` sense for an agent's action [..., A] (clipped to [-1, 1]).

    ``window_rest_kw``/``window_rest_open``: the hour's rows of the site tables' forecasts of the rest of the peak
    window (``shaver_residual`` only).

    ``idle_band``: the BESS actions within it of 0 idle (``self_consumption_window``, envs/self_consumption.py).
    """
    if layout == RULE_RESIDUAL:
        return add_rule(action, pv_kw, mall_kw, bands, bess_soc, in_peak_window, bess)
    if layout == SHAVER_RESIDUAL:
        window = (window_rest_kw, window_rest_open)
        return add_shaver(action, pv_kw, mall_kw, bands, bess_soc, in_peak_window, *window, bess)
    if layout == SELF_CONSUMPTION_WINDOW:
        return window_self_consumption_fleet_action(action, pv_kw, mall_kw, bands, bess, in_peak_window, idle_band)
    return action
