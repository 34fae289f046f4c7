"""The learner's weights pushed into collection workers by a write into their shared memory, not a queue round trip.

What it overrides: TorchRL's ``MultiSyncCollector`` / ``MultiAsyncCollector.update_policy_weights_`` with no
argument, which its iterator calls before each "collect" message. TorchRL's own push sends the weights through
each worker's instruction and acknowledgement queues (a thread hand-off on both sides): 6 ms a rollout at the
median and tens of ms at times on the 2-core machine (docs/performance.md), where an A2C rollout of 12 frames a
worker lasts ~150 ms. Between synchronous rollouts no worker is collecting, so the learner's weights can be
written straight into the workers' policy copy, whose parameters live in shared memory every worker maps; the
"collect" message that follows is sent after the write. Overlapping workers may be mid-rollout, so there the
push stays TorchRL's (with the learner's CPU weights, since the workers' copy is on the CPU).

Checked at import: both collectors still have ``update_policy_weights_``; the equivalence test is
``tests/agents/test_collection.py`` (workers collect with exactly the learner's latest weights, and a run with
workers repeats itself).
"""

from __future__ import annotations

from typing import Any

from tensordict import TensorDict, TensorDictBase
from torch import nn
from torchrl.collectors import BaseCollector, MultiAsyncCollector, MultiSyncCollector

from iquitos_lightning.fastpath.pins import require

for _collector in (MultiSyncCollector, MultiAsyncCollector):
    require(_collector, ["update_policy_weights_"], library="torchrl", override=__name__)


class _PushesLearnerWeights:
    """A collector whose no-argument weight update (what its iterator calls before each "collect" message)
    copies the learner's current weights into the workers' policy copy."""

    learner: nn.Module | None = None

    def update_policy_weights_(self, policy_or_weights: Any = None, **kwargs: Any) -> None:
        if policy_or_weights is None and not kwargs:
            if self.learner is None:
                return  # a random policy (no weights): nothing to send
            if self.write_learner_weights_in_place():
                return
            # As CPU tensors: the workers' copy is on the CPU whatever device the learner trains on.
            policy_or_weights = TensorDict.from_module(self.learner).data.to("cpu")
        super().update_policy_weights_(policy_or_weights, **kwargs)  # type: ignore[misc]

    def write_learner_weights_in_place(self) -> bool:
        """Copy the learner's weights straight into the workers' copy when that is safe; False: TorchRL pushes them.

        Never safe here in general: an overlapping worker may be mid-rollout (see :class:`WorkerSyncCollector`)."""
        return False


class WorkerSyncCollector(_PushesLearnerWeights, MultiSyncCollector):
    """``MultiSyncCollector`` whose workers collect with the learner's latest weights, written into their shared
    memory before each rollout (module docstring); where the copy's parameters are not in shared memory, TorchRL's
    push runs instead."""

    _shared_weights: TensorDictBase | None = None

    def write_learner_weights_in_place(self) -> bool:
        shared = self.shared_worker_weights()
        if shared is None:
            return False
        shared.update_(TensorDict.from_module(self.learner).data)
        return True

    def shared_worker_weights(self) -> TensorDictBase | None:
        """The workers' policy parameters, when they all live in shared memory (else None)."""
        if self._shared_weights is None and self.policy is not None:
            weights = TensorDict.from_module(self.policy).data
            leaves = list(weights.values(True, True))
            if not leaves or not all(leaf.is_shared() for leaf in leaves):
                return None
            self._shared_weights = weights
        return self._shared_weights


class WorkerAsyncCollector(_PushesLearnerWeights, MultiAsyncCollector):
    """``MultiAsyncCollector`` whose workers collect with the learner's weights of one rollout before."""


def pushes_weights_itself(collector: BaseCollector) -> bool:
    """Whether the collector sends the learner's weights to its workers before each rollout (worker collectors do)."""
    return isinstance(collector, _PushesLearnerWeights)


def close_weight_sync(collector: BaseCollector) -> None:
    """Shut a worker collector's weight-sync schemes down now (TorchRL's private ``_weight_sync_schemes``).

    Why here: TorchRL shuts them down only in their ``__del__``; left to interpreter shutdown, that ``__del__``
    starts a queue thread and waits for it forever (a SIGTERM'd ``fit`` with workers hung after its last line).
    The attribute is private and absent on the in-process collector, so a missing one is skipped; the test that
    notices a rename is ``tests/robustness/test_sigterm.py`` (the run with workers would hang past its timeout).
    """
    for scheme in (getattr(collector, "_weight_sync_schemes", None) or {}).values():
        scheme.shutdown()
