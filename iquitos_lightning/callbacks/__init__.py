"""Callbacks that observe a run and never change it: memory, speed, out-of-memory handling, progress bar, report.

Each works in any Lightning project; the RL counters they read are optional attributes of the
LightningModule (see :mod:`iquitos_lightning.callbacks.step_rate`). Usage: ``docs/callbacks.md``.
"""

from iquitos_lightning.callbacks.oom import OOM_EXIT_CODE, OutOfMemoryHandler, exit_on_out_of_memory
from iquitos_lightning.callbacks.progress import RLProgressBar
from iquitos_lightning.callbacks.report import RunReport
from iquitos_lightning.callbacks.step_rate import StepRate
from iquitos_lightning.callbacks.vram import VRAMMonitor

__all__ = [
    "OOM_EXIT_CODE",
    "OutOfMemoryHandler",
    "RLProgressBar",
    "RunReport",
    "StepRate",
    "VRAMMonitor",
    "exit_on_out_of_memory",
]
