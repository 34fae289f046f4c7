"""Callbacks of a training run: evaluate the policy, observe the run (memory, speed, progress, health, report), keep it
safe (checkpoints, OOM, Ctrl-C).

The observing ones work in any Lightning project; what they read from an RL agent is the typed
contract :class:`~iquitos_lightning.agents.contract.FrameCounting`, checked with ``isinstance`` (a module
without it gets the generic behaviour). Usage: ``docs/callbacks.md``; public names:
:mod:`iquitos_lightning.callbacks`.
"""

from iquitos_lightning.training.callbacks.best_checkpoint import BestCheckpoint
from iquitos_lightning.training.callbacks.evaluation import PolicyEvaluation
from iquitos_lightning.training.callbacks.frame_checkpoint import FrameCheckpoint
from iquitos_lightning.training.callbacks.health import LearningHealth
from iquitos_lightning.training.callbacks.model_summary import ParameterSummary
from iquitos_lightning.training.callbacks.oom import OOM_EXIT_CODE, OutOfMemoryHandler, exit_on_out_of_memory
from iquitos_lightning.training.callbacks.progress import RLProgressBar
from iquitos_lightning.training.callbacks.progress_lines import LineProgressBar
from iquitos_lightning.training.callbacks.report import RunReport
from iquitos_lightning.training.callbacks.step_rate import StepRate
from iquitos_lightning.training.callbacks.vram import VRAMMonitor

__all__ = [
    "OOM_EXIT_CODE",
    "BestCheckpoint",
    "FrameCheckpoint",
    "LearningHealth",
    "LineProgressBar",
    "OutOfMemoryHandler",
    "ParameterSummary",
    "PolicyEvaluation",
    "RLProgressBar",
    "RunReport",
    "StepRate",
    "VRAMMonitor",
    "exit_on_out_of_memory",
]
