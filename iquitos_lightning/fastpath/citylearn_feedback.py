"""CityLearn without its per-step action-feedback records: a third of its step, never read by the physics.

What it overrides: CityLearn 3.0.2's ``BuildingOpsService`` records, every step and for every charger and
the BESS, what each was asked and allowed to do (requested vs limited action and power, clip reasons) in
four private methods, ``_record_*_feedback``. They only feed its info dict and entity interface, which the
Iquitos env never reads (:mod:`.citylearn_step` skips the info dict already); at 38-128 sockets they are
about half of ``Building.apply_actions`` and a third of the whole step (docs/performance.md).
:func:`skip_action_feedback` replaces them on one env's buildings (instance attributes, nothing global);
:func:`record_action_feedback` brings CityLearn's own back (the bench's raw layer, tests).

Checked at import: a CityLearn without these four methods is refused with the version named (the
physics would be untouched, but the Iquitos env's measured speed would no longer hold).
``tests/fastpath/test_citylearn_fast_path.py`` steps a full episode with and without the records (same
flows, same rewards); ``tests/envs/test_twin.py`` replays CityLearn bit for bit against the twin.
"""

from __future__ import annotations

from typing import Any

from citylearn.citylearn import CityLearnEnv
from citylearn.internal.building_ops import BuildingOpsService

from iquitos_lightning.fastpath.pins import require

ACTION_FEEDBACK_RECORDERS = (
    "_record_charger_action_feedback",
    "_record_charger_post_apply_feedback",
    "_record_storage_action_feedback",
    "_record_storage_post_apply_feedback",
)
require(BuildingOpsService, ACTION_FEEDBACK_RECORDERS, library="citylearn", override=__name__)


def _skip_record(*args: Any, **kwargs: Any) -> None:
    return None


def skip_action_feedback(citylearn: CityLearnEnv) -> None:
    """Turn off CityLearn's action-feedback bookkeeping on this env's buildings."""
    for building in citylearn.buildings:
        for name in ACTION_FEEDBACK_RECORDERS:
            setattr(building._ops_service, name, _skip_record)


def record_action_feedback(citylearn: CityLearnEnv) -> None:
    """Undo :func:`skip_action_feedback`: CityLearn's own recorders show through again."""
    for building in citylearn.buildings:
        for name in ACTION_FEEDBACK_RECORDERS:
            vars(building._ops_service).pop(name, None)


def skips_action_feedback(citylearn: CityLearnEnv) -> bool:
    """Whether every building of ``citylearn`` has its feedback records turned off."""
    return all(
        vars(building._ops_service).get(name) is _skip_record
        for building in citylearn.buildings
        for name in ACTION_FEEDBACK_RECORDERS
    )
