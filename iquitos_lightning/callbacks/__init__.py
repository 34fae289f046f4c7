"""The observing callbacks under their public name: ``from iquitos_lightning.callbacks import StepRate``.

They live in :mod:`iquitos_lightning.training.callbacks` (with the other training-time concerns); this
package only hands their names on, so configs and user code written against ``iquitos_lightning.callbacks``
keep working.
"""

from iquitos_lightning.training.callbacks import (
    OOM_EXIT_CODE,
    FrameCheckpoint,
    OutOfMemoryHandler,
    RLProgressBar,
    RunReport,
    StepRate,
    VRAMMonitor,
    exit_on_out_of_memory,
)

__all__ = [
    "OOM_EXIT_CODE",
    "FrameCheckpoint",
    "OutOfMemoryHandler",
    "RLProgressBar",
    "RunReport",
    "StepRate",
    "VRAMMonitor",
    "exit_on_out_of_memory",
]
