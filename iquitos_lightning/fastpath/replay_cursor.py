"""The replay buffer's write cursor, read and set: what makes a saved buffer resume writing where it stopped.

What it reaches into: TorchRL's round-robin writer keeps the next slot to overwrite in ``writer._cursor``
and has no public accessor. Checkpoints store only the filled part of a buffer (a 1M buffer holding 1k
transitions saves as about a megabyte; its ``state_dict`` would write the whole 1M), so after refilling it
the cursor must be put back, or a full buffer would overwrite its newest transitions first.

Checked at import: a fresh ``TensorDictRoundRobinWriter`` still has ``_cursor``. Equivalence test:
``tests/fastpath/test_replay_cursor.py`` (a wrapped-around buffer saved and restored writes its next
transitions to the same slots as the original).
"""

from __future__ import annotations

from torchrl.data import TensorDictReplayBuffer
from torchrl.data.replay_buffers.writers import TensorDictRoundRobinWriter

from iquitos_lightning.fastpath.pins import require

require(TensorDictRoundRobinWriter(), ["_cursor"], library="torchrl", override=__name__)


def write_cursor(buffer: TensorDictReplayBuffer) -> int:
    """The slot the buffer's next write goes to."""
    return int(buffer._writer._cursor)


def set_write_cursor(buffer: TensorDictReplayBuffer, cursor: int) -> None:
    buffer._writer._cursor = int(cursor)
