"""What a controller above the env may read of the hour an env is at: the hour's context, public on both simulators.

Why: a controller that acts on the batched twin (a residual's prior, control/residual.py) needs the physical state of
every env at the start of its step, in the very arrays the env maps the action with (the sockets' bands, the BESS
SOC), so that its action is what it would be inside the env, to the bit. Both simulators build it from their own
state (``IquitosEnv.hour_context`` with numpy and Python floats, ``IquitosTwin.hour_context`` with [B] tensors); the
env itself runs no controller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from iquitos_lightning.envs.actions import SocketBands
from iquitos_lightning.envs.arrays import Array
from iquitos_lightning.site.config import BatteryConfig


@dataclass
class HourContext:
    """The state of one env (numpy/floats) or of a batch ([B] tensors) at the start of the step about to be taken."""

    pv_kw: Array
    mall_kw: Array
    bands: SocketBands  # each socket's band [..., S] this hour (envs/actions.py), what a fleet action maps onto
    bess_soc: Array  # the BESS SOC (fraction of capacity, float64) at the start of the hour
    in_peak_window: Array  # bool: the hour is inside the tariff's peak window
    # the forecast net load (mall - PV, kW) of the later hours of this hour's peak window [..., W-1] and which of them
    # are such hours (site/forecasts.py: what the observation's forecasts show)
    window_rest_kw: Array
    window_rest_open: Array
    bess: BatteryConfig


@runtime_checkable
class HasHourContext(Protocol):
    """A simulator that says what hour it is at (the CityLearn env, the twin, the one-env twin of evaluation)."""

    def hour_context(self) -> HourContext: ...


def hour_context_source(env: object) -> HasHourContext:
    """The simulator inside ``env`` (an env of envs/factory.py: the training twin, or the Gymnasium stack around the
    CityLearn env or the evaluation twin, under any TorchRL transforms) that gives the hour's context."""
    inner = getattr(env, "base_env", env)  # under a TransformedEnv's transforms
    inner = getattr(inner, "gym_env", inner)  # FlatGymEnv's Gymnasium env
    inner = getattr(inner, "unwrapped", inner)  # under the Gymnasium wrappers (episode seeding, finite check)
    if not isinstance(inner, HasHourContext):
        raise TypeError(f"{type(inner).__name__} has no hour_context(): not a simulator of the Iquitos site")
    return inner
