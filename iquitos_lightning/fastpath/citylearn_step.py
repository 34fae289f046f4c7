"""CityLearn's step without assembling the observations and info it returns: the same physics, a tenth cheaper.

What it reaches into: CityLearn 3.0.2 runs one transition in ``CityLearnRuntimeService._step_once``
(``env._runtime_service``), whose two switches ``collect_observations`` and ``collect_info`` only skip
building the return values. The Iquitos env reads the state straight from CityLearn's building objects,
never those values, and assembling them is about a tenth of CityLearn's step (docs/performance.md).

Checked at import: when the installed CityLearn has no ``_step_once`` taking those switches, the
Iquitos env falls back to the public ``step`` (same results, slower) and a ``RuntimeWarning`` says so
once. ``tests/fastpath/test_citylearn_fast_path.py`` proves the fast path is the one taken with the
pinned CityLearn, and the twin's bit-equality test (``tests/envs/test_twin.py``) that it changes nothing.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

from citylearn.citylearn import CityLearnEnv
from citylearn.internal.runtime import CityLearnRuntimeService

from iquitos_lightning.fastpath.pins import describe, missing

SWITCHES = {"collect_observations": False, "collect_info": False}


def _step_once_takes_switches() -> bool:
    if missing(CityLearnRuntimeService, ["_step_once"]):
        return False
    try:
        inspect.signature(CityLearnRuntimeService._step_once).bind(None, [], **SWITCHES)
    except TypeError:
        return False
    return True


STEP_ONCE_AVAILABLE = _step_once_takes_switches()
if not STEP_ONCE_AVAILABLE:
    warnings.warn(
        describe(CityLearnRuntimeService, ["_step_once(collect_observations, collect_info)"], "citylearn", __name__)
        + "; the Iquitos env steps through the public CityLearnEnv.step instead (same physics, ~10 % slower)",
        RuntimeWarning,
        stacklevel=2,
    )


def citylearn_transition(citylearn: CityLearnEnv) -> Callable[[list[list[float]]], Any]:
    """``citylearn.step`` without building its return values (module docstring); the public step as fallback."""
    if not STEP_ONCE_AVAILABLE:
        return citylearn.step
    return partial(citylearn._runtime_service._step_once, **SWITCHES)
