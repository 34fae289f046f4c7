"""The action an env applies: the agent's action turned into its layout's physical ``[BESS, sockets...]`` command.

Why one function: the CityLearn env and the twin must turn a derived layout's action (``self_consumption_window``)
into the same ``fleet`` action to the bit, so both call this with the hour's state; ``per_socket`` and ``fleet``
actions pass through unchanged. A residual agent's action arrives here already mapped around its controller's, by
the wrapper above the env (control/residual.py).
"""

from __future__ import annotations

from iquitos_lightning.envs.actions import SELF_CONSUMPTION_WINDOW, SocketBands
from iquitos_lightning.envs.arrays import Array
from iquitos_lightning.envs.self_consumption import window_self_consumption_fleet_action
from iquitos_lightning.site.config import BatteryConfig


def applied_action(
    layout: str,
    action: Array,
    *,
    pv_kw: Array,
    mall_kw: Array,
    bands: SocketBands,
    in_peak_window: Array,
    bess: BatteryConfig,
    idle_band: float = 0.0,
) -> Array:
    """The action [..., A] in the ``per_socket``/``fleet`` sense for an agent's action [..., A] (clipped to [-1, 1]).

    ``idle_band``: the BESS actions within it of 0 idle (``self_consumption_window``, envs/self_consumption.py).
    """
    if layout == SELF_CONSUMPTION_WINDOW:
        return window_self_consumption_fleet_action(action, pv_kw, mall_kw, bands, bess, in_peak_window, idle_band)
    return action
