"""What the compact observation says about the EV sockets: a few fleet sums instead of four columns per socket.

Why: in the fleet-level layouts (``fleet`` and the layouts built on it) the agent's EV action is one number, the
fraction of the fleet's flexible power ``sum(high - low)`` (envs/actions.py), so what it needs to know is how large
that band is and how pressing the demand behind it, not which socket holds which EV. On the default site the
per-socket block is 512 of the 576 observation columns and most of an update's cost (the first layer).

The sums come from the very band the action maps onto (:func:`~iquitos_lightning.envs.actions.socket_bands`, called
by each simulator with its state), so the observation and the action cannot disagree about the band. Every
function is array-generic (numpy for the CityLearn env, torch for the twin) and sums with a cumulative sum in index
order (as :func:`~iquitos_lightning.envs.arrays.sequential_sum` does), so the two simulators give the same bits.
"""

from __future__ import annotations

import numpy as np

from iquitos_lightning.envs.actions import SocketBands
from iquitos_lightning.envs.arrays import Array, is_torch, sequential_sums, where

URGENT_HOURS = 2  # ``ev_need_leaving_2h``: the need of the EVs that leave within this many hours (this one included)
FLEET_FEATURES = (
    "plugged_fraction",  # plugged EVs / sockets
    "ev_band_low",  # sum of the guaranteed least-laxity minimums this hour (kW) / the sockets' total charger power
    "ev_band_high",  # sum of the most each socket may take this hour (kW) / the same
    "ev_need",  # energy the plugged EVs still need (kWh) / the same power x 1 h
    "ev_need_leaving_2h",  # of it, what the EVs leaving within URGENT_HOURS need / the same
    "ev_need_hours_to_departure",  # need-weighted mean hours to departure / the longest dwell (0 without need)
)


def fleet_features(bands: SocketBands, connected: Array, hours_left: Array, fleet_kw: float, dwell_h: float) -> Array:
    """The :data:`FLEET_FEATURES` columns [..., 6] (float64) of one hour's socket bands ([..., S]).

    ``connected`` [..., S] bool, ``hours_left`` [..., S] the whole hours until each EV leaves (1 on its last hour,
    0 where empty), ``fleet_kw`` the sockets' total charger power (kW and kWh-per-hour scale), ``dwell_h`` the
    longest dwell (hours scale). ``bands`` must come from ``socket_bands`` (it carries ``need_kwh``).
    """
    need = bands.need_kwh
    if need is None:
        raise ValueError("fleet_features needs bands from socket_bands (need_kwh is None)")
    zero = 0.0 * need
    per_socket = [
        where(connected, 1.0 + zero, zero),
        bands.low,
        bands.high,
        need,
        where(hours_left <= URGENT_HOURS, need, zero),
        need * hours_left,
    ]
    # Each summed over the sockets in index order (numpy and torch give the same bits). One sum per column, not one
    # over the six stacked: the stack's copy and a cumsum over its middle axis were 2 ms of a 1,024-env twin step.
    if not is_torch(need):
        per_socket = np.broadcast_arrays(*per_socket)
    plugged, low, high, total_need, soon, weighted_hours = sequential_sums(*per_socket)
    has_need = total_need > 0
    safe_need = where(has_need, total_need, 1.0 + 0.0 * total_need)
    mean_hours = where(has_need, weighted_hours / safe_need, 0.0 * total_need)
    columns = [plugged / need.shape[-1], low / fleet_kw, high / fleet_kw, total_need / fleet_kw, soon / fleet_kw]
    columns.append(mean_hours / dwell_h)
    if is_torch(need):
        import torch  # lazy: numpy callers (the CityLearn env) never load torch here

        return torch.stack(columns, -1)
    return np.stack(columns, -1)
