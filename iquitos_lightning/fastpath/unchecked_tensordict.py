"""A TensorDict built without validating its entries, for the twin's step outputs.

Why: ``TensorDict(...)`` checks every entry's batch size and device; on the twin's step (a handful of fresh tensors
of the env's batch size and device, made by the step itself) that validation is half of a one-env step. TensorDict's
own constructors skip it through ``TensorDict._new_unsafe``; the twin's tests compare its outputs with CityLearn's
bit for bit (tests/envs/test_twin.py), so an entry of the wrong shape would fail there.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from tensordict import TensorDict

from iquitos_lightning.fastpath.pins import require

require(TensorDict, ["_new_unsafe"], library="tensordict", override=__name__)


def unchecked_tensordict(
    entries: Mapping[str, torch.Tensor], batch_size: torch.Size, device: torch.device | None
) -> TensorDict:
    """``TensorDict(entries, batch_size, device)`` without the per-entry checks: every entry must already have
    ``batch_size`` as its leading dimensions and live on ``device``."""
    return TensorDict._new_unsafe(dict(entries), batch_size=batch_size, device=device)
