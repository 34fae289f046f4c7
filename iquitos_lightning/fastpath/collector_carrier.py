"""The collector's carried state, read and set: what lets a run on the twin resume in the middle of its episodes.

What it reaches into: TorchRL's single-process ``Collector`` carries from one rollout to the next the tensordict
its next step starts from, ``_carrier`` (the last observation, ``step_count``, ``episode_reward``, the done flags,
``("collector", "traj_ids")`` when it tracks them, which the agents' collector no longer does, and whatever else
the last step left in it), and its next trajectory id in
``_traj_pool``. A new collector makes its carrier from a reset of the env (``_make_carrier``). Its public
``state_dict`` holds the trajectory counter but, by design, not the carrier ("runtime environment state is not
generally serializable"), so its ``load_state_dict`` starts fresh trajectories: right for CityLearn, whose middle
of an episode cannot be restored, wrong for the twin, whose whole state is a few tensors
(:meth:`~iquitos_lightning.envs.twin.IquitosTwin.resume_state`). Here the carrier and the trajectory counter are
saved as plain tensors and put back into a new collector, after the twin's state (only the entries of the new
collector's own carrier: a state saved by a collector that tracked trajectory ids is restored without them).

Checked at import: ``Collector`` still makes its carrier in ``_make_carrier`` and has ``_traj_pool``; at use, a
collector without a ``_carrier`` is refused naming the version. Equivalence test:
``tests/fastpath/test_collector_carrier.py`` (a new collector on a new twin, given the saved twin state and carried
state, collects exactly the rollouts the original would have collected next, every key).
"""

from __future__ import annotations

from typing import Any

from tensordict import TensorDict, TensorDictBase
from torchrl.collectors import Collector

from iquitos_lightning.fastpath.pins import LibraryChanged, describe, require

require(Collector, ["_make_carrier", "_traj_pool"], library="torchrl", override=__name__)


def carried_state(collector: Collector) -> dict[str, Any]:
    """What ``collector`` carries to its next rollout, as CPU tensors in nested dicts (a ``weights_only`` load takes
    it): the carrier and the next trajectory id."""
    carrier = _carrier(collector)
    return {
        "carrier": carrier.detach().clone().cpu().to_dict(),
        "traj_pool": {name: value.clone() for name, value in collector._traj_pool.state_dict().items()},
    }


def continue_from(collector: Collector, saved: dict[str, Any]) -> None:
    """Make ``collector``'s next rollout start where the one that saved ``saved`` (:func:`carried_state`) would
    have: its carrier and trajectory counter replaced. Its env must already hold the state it was saved with.

    A ValueError, naming the entry, when ``saved`` lacks an entry of this collector's carrier or has it in another
    shape or dtype (another batch or observation size); nothing is changed then.
    """
    carrier = _carrier(collector)
    try:
        restored = TensorDict(saved["carrier"], batch_size=carrier.batch_size, device=carrier.device)
    except RuntimeError as error:  # tensordict's message for entries of another batch size
        raise ValueError(f"the saved collector state is not of this collector's batch: {error}") from None
    theirs = dict(restored.items(include_nested=True, leaves_only=True))
    for key, value in carrier.items(include_nested=True, leaves_only=True):
        other = theirs.get(key)
        if other is None or other.shape != value.shape or other.dtype != value.dtype:
            found = "none" if other is None else f"{other.dtype} {tuple(other.shape)}"
            raise ValueError(
                f"the saved collector state's {key!r} is {found}, this collector's {value.dtype} {tuple(value.shape)}"
            )
    # only this carrier's entries: a run saved by a collector that tracked trajectory ids carries them too
    collector._carrier = restored.select(*carrier.keys(include_nested=True, leaves_only=True))
    collector._traj_pool.load_state_dict(saved["traj_pool"])


def _carrier(collector: Collector) -> TensorDictBase:
    carrier = getattr(collector, "_carrier", None)
    if not isinstance(carrier, TensorDictBase):
        raise LibraryChanged(describe(collector, ["_carrier"], "torchrl", __name__))
    return carrier
