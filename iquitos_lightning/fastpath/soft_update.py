"""Polyak (soft) target-network updates in one multi-tensor operation.

Why not TorchRL's ``SoftUpdate.step`` as is: it lerps each group of target parameters through
``TensorDict.data`` views that it rebuilds on every call; with SAC's one update per frame on a small
network that bookkeeping costs more than the arithmetic (0.24 ms a step at 64x64, against 0.05 ms for one
foreach lerp; docs/performance.md). Small next to a ~8 ms compiled CPU update, but SAC collects in a worker
one rollout ahead, so its update, not the env, sets the frame rate there. :class:`ForeachSoftUpdate` is ``SoftUpdate``
(same construction, same checks, same state) whose ``step`` pairs the same source and target tensors and
lerps them all in one ``torch._foreach_lerp_`` call with ``SoftUpdate``'s own weight, ``1 - eps``:
the same values, bit for bit (``tests/agents/test_target_update.py``).
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torchrl.objectives import SoftUpdate

from iquitos_lightning.fastpath.pins import require

require(SoftUpdate, ["_sources", "_targets", "step"], library="torchrl", override=__name__)


class ForeachSoftUpdate(SoftUpdate):
    """``SoftUpdate`` whose ``step`` is one foreach lerp of every target tensor towards its source."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        require(self, ["_target_names", "eps", "initialized"], library="torchrl", override=__name__)

    def step(self) -> None:
        if not self.initialized:
            super().step()  # raises TorchRL's own "must be initialized" error
            return
        for name in self._target_names:  # what SoftUpdate.step reads first: the loss module's lazy target names
            getattr(self.loss_module, name)
        sources: list[torch.Tensor] = []
        targets: list[torch.Tensor] = []
        for key, source in self._sources.items():
            target = self._targets.get(f"target_{key}")
            if isinstance(source, TensorDictBase):
                pairs = [(leaf, target.get(subkey)) for subkey, leaf in source.items(True, True)]
            else:
                pairs = [(source, target)]
            for source_leaf, target_leaf in pairs:
                if target_leaf.requires_grad:
                    raise RuntimeError("the target parameter is part of a graph.")
                sources.append(source_leaf.data)
                targets.append(target_leaf.data)
        torch._foreach_lerp_(targets, sources, 1 - self.eps)
