"""The observing callbacks under their public name: ``from iquitos_lightning.callbacks import StepRate``.

They live in :mod:`iquitos_lightning.training.callbacks` (with the other training-time concerns); this
package only hands their names on, so configs and user code written against ``iquitos_lightning.callbacks``
keep working.
"""

from iquitos_lightning.training import callbacks as _training_callbacks
from iquitos_lightning.training.callbacks import *  # noqa: F403 - the public names, exactly those of __all__

__all__ = list(_training_callbacks.__all__)
