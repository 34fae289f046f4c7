"""Where our agent's time goes inside ``fit``: a cProfile of the timed rollouts, read as one table of phases.

Why cProfile and phases: a flat profile lists a thousand functions, and a shared function (``Linear.forward``,
``TensorDict.__getitem__``) serves collection and the update alike, so grouping by module would mix them. The
phases are instead the inclusive times of the few functions that open each phase (the twin's ``_step``, the
collector's ``rollout``, the agent's ``with_advantages``, ``run_update``, ``compute_losses``, Lightning's ``log``),
nested as they call each other, each phase's own share its inclusive time less its children's. What no phase
claims (Lightning's loop, the dataloader, glue) is "other", so the shares add up to the profiled total.

cProfile slows Python-heavy code more than tensor kernels, so the shares lean towards the Python phases
(collector bookkeeping, TensorDict indexing, logging) and the profiled frames/s are below the timed ones: read
the table for where to look, and the timed rows of the learner section for how fast.
"""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl

Function = tuple[str, str]  # (a part of the source path, the function's name)


@dataclass(frozen=True)
class Node:
    """A phase: its opening functions and the phases nested inside it; its own time goes to table row ``row``."""

    row: str
    functions: tuple[Function, ...]
    children: tuple[Node, ...] = ()


TWIN_SOURCE = "iquitos_lightning/envs/twin.py"
TWIN = Node("env: twin physics", ((TWIN_SOURCE, "_step"), (TWIN_SOURCE, "_reset")))
COLLECTION = Node(
    "collection: collector bookkeeping",
    (("torchrl/collectors/_single.py", "rollout"),),
    (
        Node("env: TorchRL step/reset, transforms", (("torchrl/envs/common.py", "step_and_maybe_reset"),), (TWIN,)),
        Node("collection: policy", (("iquitos_lightning/fastpath/tanh_normal.py", "forward"),)),
    ),
)
UPDATE_STEP = "iquitos_lightning/agents/update_step.py"
LOSSES = Node("update: losses forward", ((UPDATE_STEP, "compute_losses"),))
UPDATE = Node("update: backward, clip, optimizer", ((UPDATE_STEP, "run_update"),), (LOSSES,))
ON_POLICY_LEARN = Node(
    "health signals, reward normalisation",
    (("iquitos_lightning/agents/on_policy.py", "learn"),),
    (
        Node("advantage: GAE and critic", (("iquitos_lightning/agents/on_policy.py", "with_advantages"),)),
        Node(
            "update: minibatch indexing",
            (("iquitos_lightning/agents/ppo.py", "learn_from"), ("iquitos_lightning/agents/a2c.py", "learn_from")),
            (UPDATE,),
        ),
    ),
)
OFF_POLICY_LEARN = Node(
    "replay: store rollout, slice batches",
    (("iquitos_lightning/agents/off_policy.py", "learn"),),
    (
        Node("replay: sample batches", (("torchrl/data/replay_buffers/replay_buffers/", "sample"),)),
        UPDATE,
        Node("health signals, reward normalisation", (("iquitos_lightning/agents/sac.py", "batch_health"),)),
    ),
)
LOGGING = Node(
    "logging",
    (
        ("lightning/pytorch/core/module.py", "log_dict"),
        ("lightning/pytorch/core/module.py", "log"),
        ("iquitos_lightning/fastpath/rollout_logging.py", "log_rollout_metrics"),
    ),
)
PHASES = (COLLECTION, ON_POLICY_LEARN, OFF_POLICY_LEARN, LOGGING)
OTHER = "other: Lightning loop, dataloader, glue"
ROWS = (
    "env: twin physics",
    "env: TorchRL step/reset, transforms",
    "collection: policy",
    "collection: collector bookkeeping",
    "advantage: GAE and critic",
    "replay: store rollout, slice batches",
    "replay: sample batches",
    "update: losses forward",
    "update: backward, clip, optimizer",
    "update: minibatch indexing",
    "health signals, reward normalisation",
    "logging",
    OTHER,
)


@dataclass
class PhaseProfile:
    """One algorithm's profiled window: seconds per table row (they add up to ``seconds``) and frames profiled."""

    algorithm: str
    seconds: float
    frames: int
    rows: dict[str, float]

    def share(self, row: str) -> float:
        return self.rows.get(row, 0.0) / self.seconds if self.seconds > 0 else float("nan")

    @property
    def microseconds_per_frame(self) -> float:
        return self.seconds / self.frames * 1e6 if self.frames else float("nan")


def _matches(key: tuple[str, int, str], functions: tuple[Function, ...]) -> bool:
    filename, _, name = key
    filename = filename.replace("\\", "/")
    return any(part in filename and name == function for part, function in functions)


def inclusive_seconds(stats: dict, functions: tuple[Function, ...]) -> float:
    """Cumulative seconds of the functions, less the calls one of them makes to another (counted once)."""
    total = 0.0
    for key, (_, _, _, cumulative, callers) in stats.items():
        if not _matches(key, functions):
            continue
        total += cumulative
        for caller, edge in callers.items():
            if _matches(caller, functions):
                total -= edge[3]
    return total


def phase_rows(stats: dict, phases: tuple[Node, ...] = PHASES) -> tuple[dict[str, float], float]:
    """Seconds per table row (:data:`ROWS`), "other" included, and the profile's total."""
    rows: dict[str, float] = dict.fromkeys(ROWS, 0.0)

    def walk(node: Node) -> float:
        """Adds the node's own time to its row; its inclusive time (0 for a phase this agent does not have)."""
        inclusive = inclusive_seconds(stats, node.functions)
        if inclusive > 0.0:
            rows[node.row] += inclusive - sum(walk(child) for child in node.children)
        return inclusive

    claimed = sum(walk(phase) for phase in phases)
    total = sum(entry[2] for entry in stats.values())
    rows[OTHER] = total - claimed
    return rows, total


class ProfileWindow(pl.Callback):
    """cProfile from the first rollout past ``start_frames`` (the timed window's start) to the end of ``fit``."""

    def __init__(self, start_frames: int) -> None:
        self.start_frames = start_frames
        self.profiler = cProfile.Profile()
        self.frames_at_start: int | None = None
        self.frames_at_end = 0

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.frames_at_start is None and pl_module.frames_done >= self.start_frames:
            self.frames_at_start = int(pl_module.frames_done)
            self.profiler.enable()

    def on_train_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.profiler.disable()
        self.frames_at_end = int(pl_module.frames_done)

    def phases(self, algorithm: str) -> PhaseProfile:
        stats = pstats.Stats(self.profiler).stats  # type: ignore[attr-defined]
        rows, total = phase_rows(stats)
        return PhaseProfile(algorithm, total, self.frames_at_end - (self.frames_at_start or 0), rows)


def profile_fit(algorithm: str, start_frames: int, fit: Callable[[list[pl.Callback]], Any]) -> PhaseProfile:
    """Run ``fit`` (our agent's, given the callbacks to add) under :class:`ProfileWindow`; its phases."""
    window = ProfileWindow(start_frames)
    fit([window])
    return window.phases(algorithm)
