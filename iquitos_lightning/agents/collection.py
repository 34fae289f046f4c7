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
resume exact: the env's episode counter and the RNG live where the checkpoint can read them (and, for the twin,
its whole state and what the collector carries to its next rollout, so it resumes mid-episode: agents/resume.py,
fastpath/collector_carrier.py). Worker
processes keep their own, so a resumed run with workers or overlap restarts the workers' episode
streams (docs/robustness.md "Resuming a run"). Workers are forked from a fork server that has imported what they
need (agents/worker_start.py), and rebuild their env from a picklable maker
(:func:`~iquitos_lightning.envs.factory.worker_env_makers`).
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import math
import signal
import threading
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, Protocol

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torch.utils.data import IterableDataset
from torchrl.collectors import BaseCollector, Collector
from torchrl.envs import EnvBase

from iquitos_lightning.agents.config import RolloutConfig
from iquitos_lightning.agents.site_envs import agent_worker_env_makers
from iquitos_lightning.agents.worker_start import use_a_fork_server
from iquitos_lightning.envs.env_config import EnvConfig
from iquitos_lightning.envs.factory import WORKER_IGNORED_SIGNALS
from iquitos_lightning.fastpath.collector_weights import (
    WorkerAsyncCollector,
    WorkerSyncCollector,
    close_weight_sync,
    pushes_weights_itself,
)
from iquitos_lightning.fastpath.distribution_bounds import apply_to_distribution_bounds


class RolloutSource(Protocol):
    """What :class:`CollectorStream` asks of the agent it streams rollouts of (:class:`~.base.RLAgent`)."""

    frames_done: int
    rollout_config: RolloutConfig

    def current_period(self) -> tuple[int, int]: ...
    def restore_pending_state(self) -> None: ...
    def next_rollout(self) -> TensorDictBase: ...


class CollectorStream(IterableDataset):
    """The train dataloader: rollouts from the agent's collector until the end of the current evaluation period.

    Its length is the number of batches of the current period (counted from the period's start, so a
    run resumed mid-period ends the epoch at the same frame). ``state_dict`` is empty on purpose:
    the agent's checkpoint holds everything needed to continue.
    """

    def __init__(self, agent: RolloutSource) -> None:
        self.agent = agent

    def __len__(self) -> int:
        start, end = self.agent.current_period()
        return math.ceil((end - start) / self.agent.rollout_config.frames_per_batch)

    def __iter__(self) -> Iterator[TensorDictBase]:
        agent = self.agent
        agent.restore_pending_state()
        _, end = agent.current_period()
        while agent.frames_done < end:
            yield agent.next_rollout()

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass


class RolloutCollection:
    """An agent's collector for one fit: started with the policy it runs, read rollout by rollout, its policy's
    weights brought up to date after each update, its workers stopped at the end (the next fit starts a new one)."""

    def __init__(self) -> None:
        self.collector: BaseCollector | None = None
        self.policy: Any = None  # what the collector runs (fastpath/tanh_normal.py)
        self._iterator: Iterator[TensorDictBase] | None = None
        self._in_process = True

    def start(self, env_config: EnvConfig, train_env: EnvBase, policy: Any, *, overlap: bool, **options: Any) -> None:
        """A collector of ``env_config`` running ``policy`` (:func:`make_collector`'s ``options``)."""
        self.stop()
        self.policy = policy
        self.collector = make_collector(env_config, train_env, policy, overlap=overlap, **options)
        self._in_process = collects_in_process(env_config, overlap)

    def next_rollout(self) -> TensorDictBase:
        if self._iterator is None:
            self._iterator = iter(self.collector)
        rollout = next(self._iterator)
        env = self.collector.env if self._in_process else None
        check_rollout = getattr(env, "check_rollout", None)
        if check_rollout is not None and not env.checks_every_step:  # a twin on a GPU checks rollouts, not steps
            check_rollout(rollout)
        return rollout

    def sync_weights(self) -> None:
        """After an update: a collector that runs a copy of the policy (not the learner's own modules) and does not
        fetch the weights itself before each rollout gets them now."""
        collector = self.collector
        if collector is not None and not pushes_weights_itself(collector) and collector.policy is not self.policy:
            collector.update_policy_weights_()

    def stop(self) -> None:
        """Stop the collector's worker processes (if any) and forget it."""
        if self.collector is not None and not self._in_process:
            shutdown_workers(self.collector)
        self.collector = self._iterator = None


def collects_in_process(env_config: EnvConfig, overlap: bool) -> bool:
    """Whether rollouts are collected by the training process's own env (the exact-resume case)."""
    return env_config.backend.num_workers == 1 and not overlap


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
    # A twin on the training device (env.backend.device: training) keeps its rollouts there: GAE and the updates
    # read them where they are; any other env steps on the CPU and its rollouts go to host-side buffers.
    env_device = train_env.device if collects_in_process(env_config, overlap) else torch.device("cpu")
    common: dict[str, Any] = {
        "frames_per_batch": frames_per_batch,
        "total_frames": -1,
        "env_device": env_device,
        "policy_device": policy_device,
        "storing_device": env_device,
        **options,
    }
    if collects_in_process(env_config, overlap):
        # No ("collector", "traj_ids"): no agent reads them (rollouts and the replay buffer drop the entry), and
        # keeping them up to date cost ~0.5 ms of an A2C rollout's ~10 ms of collection (64 twin envs x 8 steps)
        return Collector(train_env, policy, auto_register_policy_transforms=False, track_traj_ids=False, **common)
    makers = agent_worker_env_makers(env_config)
    worker_policy = None if policy is None else copy.deepcopy(policy).to("cpu")
    if worker_policy is not None:  # the actor's bounds follow the agent's device, and .to does not reach them
        apply_to_distribution_bounds(worker_policy, lambda tensor: tensor.to("cpu"))
    common["policy_device"] = "cpu"
    # With overlap each worker yields whole rollouts of its own: with several workers, a rollout is one worker's.
    collector_class = WorkerAsyncCollector if overlap else WorkerSyncCollector
    use_a_fork_server()
    with stop_signals_blocked():  # the fork server, if this starts it, and each worker start with them blocked
        collector = collector_class(makers, worker_policy, update_at_each_batch=True, **common)
    collector.learner = policy
    at_exit = partial(shutdown_workers, collector)
    _SHUTDOWN_AT_EXIT[id(collector)] = at_exit
    atexit.register(at_exit)  # dropped by shutdown_workers; see its docstring
    return collector


_SHUTDOWN_AT_EXIT: dict[int, Callable[[], None]] = {}


def shutdown_workers(collector: BaseCollector) -> None:
    """Stop a collector's workers now: ``close`` to each worker (SIGKILL after TorchRL's timeout if one hangs),
    then its weight-sync queues.

    Why :func:`make_collector` also registers this at exit: a run that ended by an exception (a SIGTERM
    included) skips ``on_fit_end``, so the collector would be left to the garbage collector at interpreter
    shutdown, where TorchRL's weight-sync ``__del__`` starts a queue thread and waits forever for it (seen:
    ``fit`` with workers hung after its last line), and multiprocessing's exit handler would join workers
    that ignore SIGTERM and are not daemonic. Exit handlers run last-registered first, so this one runs
    while threads can still start and before multiprocessing's.
    """
    at_exit = _SHUTDOWN_AT_EXIT.pop(id(collector), None)
    if at_exit is not None:
        atexit.unregister(at_exit)
    collector.shutdown()
    close_weight_sync(collector)


@contextlib.contextmanager
def stop_signals_blocked() -> Iterator[None]:
    """SIGINT and SIGTERM held back in this thread while the workers start, delivered when it ends.

    Why: a worker inherits the signal mask (from the fork server, itself started with the first worker inside
    this block: agents/worker_start.py), so a stop signal sent to the group while it is still starting stays
    pending in it and is discarded when the worker ignores it
    (:func:`~iquitos_lightning.envs.factory.worker_env_makers`); unblocked, it would kill the worker. The
    training process gets its own copy of the signal as soon as the workers are started.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, WORKER_IGNORED_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
