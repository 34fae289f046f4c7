"""Which TorchRL collector gathers an agent's rollouts: in the training process, or in worker processes.

Why worker processes: on the Iquitos site the simulator step is most of a frame (at 38 sockets on
one core, even after skipping CityLearn's action-feedback records: docs/performance.md), so
collection only gets faster when the env steps elsewhere:

- ``num_workers`` > 1: TorchRL's ``MultiSyncCollector``; each worker process holds one env and a copy
  of the policy and collects its share of every rollout, one message per rollout. The training
  process waits, then learns, then sends the new weights with the next "collect" message, so
  on-policy agents (PPO, A2C) learn from exactly the policy they collected with. (A ``ParallelEnv``
  does one round trip per env step instead and was slower than one env on a 2-core machine.)
- ``overlap``: TorchRL's ``MultiAsyncCollector``; the worker collects the next rollout while the
  training process learns from this one. The weights are sent with each "collect" message, after
  the updates of the rollout before, so the collecting policy lags the learner by one rollout:
  fine for off-policy agents (SAC), refused for on-policy ones by the agent.

Workers run a CPU copy of the policy whose weights live in shared memory; the learner's weights are
copied into it only with a "collect" message, when no worker is collecting. (Handing TorchRL the
learner's own policy would put the learner's parameters in shared memory, so an overlapping worker
would see every update mid-rollout: a different run each time.) With the workers' RNG seeded from
their env seeds, a run with workers or overlap repeats itself exactly.

One worker with neither switch collects in the training process (``Collector``), which is what makes
resume exact: the env's episode counter and the RNG live where the checkpoint can read them. Worker
processes keep their own, so a resumed run with workers or overlap restarts the workers' episode
streams (README "Resuming a run"). Workers are started with TorchRL's default ``spawn``: they rebuild
their env from a picklable maker (:func:`~iquitos_lightning.envs.factory.worker_env_makers`).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors import BaseCollector, Collector, MultiAsyncCollector, MultiSyncCollector
from torchrl.envs import EnvBase

from iquitos_lightning.envs.factory import EnvConfig, worker_env_makers


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
    """``MultiSyncCollector`` whose workers collect with the learner's latest weights.

    The push before each rollout writes the learner's weights straight into the workers' policy copy, whose
    parameters live in shared memory that every worker maps: between synchronous rollouts no worker is
    collecting, and the "collect" message that follows is sent after the write. TorchRL's own push does the
    same write and then a round trip through each worker's instruction and acknowledgement queues (a thread
    hand-off on both sides), 6 ms a rollout at the median and tens of ms at times on the 2-core machine
    (docs/performance.md), where an A2C rollout of 12 frames a worker lasts ~150 ms. Should the copy's parameters not be
    in shared memory, TorchRL's push runs instead.
    """

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


def collects_in_process(env_config: EnvConfig, overlap: bool) -> bool:
    """Whether rollouts are collected by the training process's own env (the exact-resume case)."""
    return env_config.num_workers == 1 and not overlap


def make_collector(
    env_config: EnvConfig,
    train_env: EnvBase,
    policy: TensorDictModule | None,
    *,
    frames_per_batch: int,
    overlap: bool,
    policy_device: torch.device | str = "cpu",
    **options: Any,
) -> BaseCollector:
    """The collector of ``env_config``: in-process, synchronous workers or one rollout ahead (module docstring).

    ``frames_per_batch`` is the whole rollout: with synchronous workers each collects its share of it, with
    ``overlap`` each worker collects whole rollouts in turn.
    ``options`` go to the collector (e.g. ``init_random_frames``).
    """
    common: dict[str, Any] = {
        "frames_per_batch": frames_per_batch,
        "total_frames": -1,
        "env_device": "cpu",
        "policy_device": policy_device,
        "storing_device": "cpu",
        **options,
    }
    if collects_in_process(env_config, overlap):
        return Collector(train_env, policy, auto_register_policy_transforms=False, **common)
    makers = worker_env_makers(env_config)
    worker_policy = None if policy is None else copy.deepcopy(policy).to("cpu")
    common["policy_device"] = "cpu"
    # With overlap each worker yields whole rollouts of its own: with several workers, a rollout is one worker's.
    collector_class = WorkerAsyncCollector if overlap else WorkerSyncCollector
    collector = collector_class(makers, worker_policy, update_at_each_batch=True, **common)
    collector.learner = policy
    return collector


def pushes_weights_itself(collector: BaseCollector) -> bool:
    """Whether the collector sends the learner's weights to its workers before each rollout (worker collectors do)."""
    return isinstance(collector, _PushesLearnerWeights)
