"""What training callbacks may read from an agent: typed protocols instead of attribute names looked up by string.

Why: the progress bar, the step rate, the frame checkpoints and the report all need the agent's counters
(frames done against the frame budget above all). Reading them with ``getattr(module, "frame_budget", None)``
made the contract a set of names nobody could check; here it is a ``typing.Protocol`` that
:class:`~iquitos_lightning.agents.base.RLAgent` satisfies and a callback tests with ``isinstance``. Any other
LightningModule that has these attributes gets the same treatment (the callbacks work in any Lightning
project), and one that does not gets the callbacks' generic behaviour.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class FrameCounting(Protocol):
    """An agent's progress, in environment frames (what the step rate, progress bar and checkpoints read)."""

    frames_done: int  # environment frames collected so far
    frame_budget: int | None  # the run's total frames (None: no budget)
    updates_done: int  # gradient updates so far
    episodes_done: int  # finished training episodes so far
    last_episode_return: float | None  # return of the last finished training episode


@runtime_checkable
class SelectsPolicy(Protocol):
    """An agent whose evaluations also score a selection year, logged as ``select/score`` (agents/selection.py)."""

    selects_policy: bool  # False: it logs no selection score this run


@runtime_checkable
class SavesPolicyOnly(Protocol):
    """An agent that can leave its training-only state (a replay buffer) out of a checkpoint kept to be evaluated
    (``best.ckpt``): ``saving_policy_only`` is True while such a checkpoint is written. Why: SAC's buffer is 50-86 MB
    of a checkpoint whose policy is 1 MB, written again at every better evaluation."""

    saving_policy_only: bool


def frames_done(module: object) -> int | None:
    """``module.frames_done`` when it counts frames (:class:`FrameCounting`), else None."""
    return int(module.frames_done) if isinstance(module, FrameCounting) else None


def frame_budget(module: object) -> int | None:
    """``module.frame_budget`` when it counts frames towards one, else None."""
    if not isinstance(module, FrameCounting) or module.frame_budget is None:
        return None
    return int(module.frame_budget)


@runtime_checkable
class PlaysEvaluations(Protocol):
    """A callback that plays and logs an agent's evaluation episodes (``training.callbacks.PolicyEvaluation``): what
    an agent's validation and test need, since its own ``validation_step`` only hands out the episode."""

    def evaluation_flows(self) -> object: ...
