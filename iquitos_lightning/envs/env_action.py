"""The action an env applies: the agent's action turned into its layout's physical ``[BESS, sockets...]`` command.

Why one function: the CityLearn env and the twin must turn a derived layout's action (``rule_residual``,
``grid_target``) into the same ``fleet`` action to the bit, so both call this with the hour's state;
``per_socket`` and ``fleet`` actions pass through unchanged.
"""

from __future__ import annotations

from iquitos_lightning.envs.actions import GRID_TARGET, RULE_RESIDUAL, Array, SocketBands
from iquitos_lightning.envs.grid_target import grid_target_fleet_action
from iquitos_lightning.envs.rule_prior import add_rule
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
) -> Array:
    """The action [..., A] in the ``per_socket``/``fleet`` sense for an agent's action [..., A] (clipped to [-1, 1])."""
    if layout == RULE_RESIDUAL:
        return add_rule(action, pv_kw, mall_kw, bands, bess_soc, in_peak_window, bess)
    if layout == GRID_TARGET:
        return grid_target_fleet_action(action, pv_kw, mall_kw, bands, bess, max_import_kw)
    return action
