"""Collection in worker processes: which weights each rollout was collected with, and repeatable runs.

Real TorchRL worker collectors on Pendulum (spawned processes, a few seconds each to start).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from tensordict.nn import TensorDictModule
from torch import nn

from iquitos_lightning.agents import PPO, SAC, EnvConfig, RolloutConfig
from iquitos_lightning.agents.collection import make_collector
from iquitos_lightning.agents.site_envs import agent_worker_env_makers
from iquitos_lightning.envs.env_config import Backend, Episodes
from iquitos_lightning.envs.factory import make_env, worker_env_makers
from iquitos_lightning.errors import ConfigError
from tests.agents.agents_testkit import BatchRecorder, cpu_trainer, small_sac


def _constant_policy(value: float) -> TensorDictModule:
    """A policy whose action is its bias: which weights collected a rollout is read off its actions."""
    layer = nn.Linear(3, 1)
    with torch.no_grad():
        layer.weight.zero_()
        layer.bias.fill_(value)
    return TensorDictModule(layer, in_keys=["observation"], out_keys=["action"])


def _actions_per_rollout(overlap: bool, num_workers: int) -> list[float]:
    """Set the learner's bias to 0.1, 0.2, ... after each rollout, as training would; return each rollout's action."""
    config = EnvConfig(name="Pendulum-v1", backend=Backend(num_workers=num_workers), episodes=Episodes(max_steps=20))
    policy = _constant_policy(0.1)
    collector = make_collector(config, make_env(config), policy, frames_per_batch=10 * num_workers, overlap=overlap)
    actions = []
    try:
        for index, rollout in enumerate(collector):
            assert rollout.numel() == 10 * num_workers
            values = rollout["action"].unique()
            assert values.numel() == 1, "one rollout was collected with one set of weights"
            actions.append(round(float(values), 3))
            with torch.no_grad():
                policy.module.bias.fill_(0.1 * (index + 2))  # the "update" after learning from this rollout
            if index == 3:
                break
    finally:
        collector.shutdown()
    return actions


def _status(pid: int) -> dict[str, str]:
    """``/proc/<pid>/status`` as a dict (Linux)."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def _parent_pid(pid: int) -> int:
    return int(_status(pid)["PPid"])


def _blocked_signals(pid: int) -> set[int]:
    mask = int(_status(pid)["SigBlk"], 16)
    return {number for number in range(1, 65) if mask & (1 << (number - 1))}


def test_synchronous_workers_collect_with_the_latest_weights_pushed_through_shared_memory() -> None:
    """Each rollout carries the weights the learner had when it started (0.1, 0.2, ...). The push before a rollout
    writes the workers' shared parameters in place (no queue round trip): only true while TorchRL keeps the workers'
    policy copy in shared memory, which the push after the first rollout checks. The same collector shows where its
    workers come from: forked by a fork server (agents/worker_start.py) that was started, with the first worker,
    with the stop signals blocked, so a Ctrl-C or SIGTERM to the group cannot end a worker before it ignores them."""
    config = EnvConfig(name="Pendulum-v1", backend=Backend(num_workers=2), episodes=Episodes(max_steps=20))
    policy = _constant_policy(0.1)
    collector = make_collector(config, make_env(config), policy, frames_per_batch=20, overlap=False)
    actions = []
    try:
        assert multiprocessing.get_start_method() == "forkserver"
        servers = {_parent_pid(worker.pid) for worker in collector.procs}
        assert len(servers) == 1 and servers != {os.getpid()}, "the workers are not forked by one fork server"
        (server,) = servers
        assert "forkserver" in Path(f"/proc/{server}/cmdline").read_text()
        assert {signal.SIGINT, signal.SIGTERM} <= _blocked_signals(server)
        shared = collector.shared_worker_weights()
        assert shared is not None, "the workers' policy copy is not in shared memory"
        for index, rollout in enumerate(collector):
            assert rollout.numel() == 20
            values = rollout["action"].unique()
            assert values.numel() == 1, "one rollout was collected with one set of weights"
            actions.append(round(float(values), 3))
            if index == 3:
                break
            with torch.no_grad():
                policy.module.bias.fill_(0.1 * (index + 2))  # the "update" after learning from this rollout
            if index == 0:  # the push by hand, as the collector makes it before the next rollout
                collector.update_policy_weights_()
                assert float(shared["module", "bias"]) == pytest.approx(0.2)
                assert float(policy.module.bias) == pytest.approx(0.2), "the learner's own weights are not touched"
    finally:
        collector.shutdown()
    assert actions == [0.1, 0.2, 0.3, 0.4]


def test_overlapping_worker_collects_with_the_weights_of_one_rollout_before() -> None:
    # Rollout k+1 is collected while rollout k trains, so it carries the weights from before that training.
    assert _actions_per_rollout(overlap=True, num_workers=1) == [0.1, 0.1, 0.2, 0.3]


def _fit_parameters(make_agent, recorder: BatchRecorder | None = None) -> torch.Tensor:
    """Weights after a seeded fit of a fresh agent."""
    pl.seed_everything(7)
    agent = make_agent()
    cpu_trainer(callbacks=[recorder] if recorder else None).fit(agent)
    assert agent.frames_done == agent.frame_budget
    return torch.cat([parameter.detach().flatten() for parameter in agent.parameters()])


def test_sac_with_overlap_trains_and_repeats_itself_exactly() -> None:
    def overlapping_sac() -> SAC:
        sac = small_sac(200, frames_per_batch=50)
        sac.rollout_config.overlap = True
        return sac

    first, again = _fit_parameters(overlapping_sac), _fit_parameters(overlapping_sac)
    assert torch.equal(first, again)
    pl.seed_everything(7)
    fresh = torch.cat([parameter.detach().flatten() for parameter in overlapping_sac().parameters()])
    assert not torch.equal(first, fresh), "the updates changed the weights"


def test_ppo_with_two_workers_learns_from_both_and_repeats_itself_exactly() -> None:
    def two_worker_ppo() -> PPO:
        return PPO(
            env=EnvConfig(name="Pendulum-v1", backend=Backend(num_workers=2), episodes=Episodes(seed=3, max_steps=50)),
            rollout=RolloutConfig(frame_budget=200, frames_per_batch=100, eval_every_frames=200, eval_episodes=0),
            hidden_sizes=(16, 16),
            minibatch_size=50,
        )

    recorder = BatchRecorder()
    first, again = _fit_parameters(two_worker_ppo, recorder), _fit_parameters(two_worker_ppo)
    assert recorder.first_batch.shape == (2, 50), "each worker collects half of every rollout"
    assert not torch.equal(recorder.first_batch["observation"][0], recorder.first_batch["observation"][1])
    assert torch.equal(first, again)


def test_overlap_is_refused_for_on_policy_agents() -> None:
    rollout = RolloutConfig(frame_budget=100, frames_per_batch=50, eval_every_frames=100, overlap=True)
    with pytest.raises(ConfigError, match="overlap.*on-policy"):
        PPO(env=EnvConfig(name="Pendulum-v1"), rollout=rollout, hidden_sizes=(8, 8))


def test_worker_envs_ignore_ctrl_c_and_sigterm_so_the_training_process_can_finish_its_rollout() -> None:
    # Ctrl-C (a terminal) and SIGTERM (`timeout`, a scheduler) reach every process of the group; the maker runs
    # in each worker process, which the collector starts with both signals blocked.
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, list(previous))
    try:
        env = worker_env_makers(EnvConfig(name="Pendulum-v1", backend=Backend(num_workers=2)))[1]()
        assert all(signal.getsignal(signum) is signal.SIG_IGN for signum in previous)
        assert not set(previous) & signal.pthread_sigmask(signal.SIG_BLOCK, [])  # unblocked once ignored
        assert env.rollout(3).numel() == 3
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def test_a_worker_unpickling_its_env_maker_imports_no_lightning() -> None:
    """A collection worker starts by unpickling its env maker (agents/site_envs.py), which imports the agents package
    first; the package imports its agents on first use, so the worker skips Lightning (~4 s of each worker's start on
    the 2-core machine, agents/__init__.py)."""
    config = EnvConfig(name="Pendulum-v1", backend=Backend(num_workers=2), episodes=Episodes(max_steps=20))
    maker = pickle.dumps(agent_worker_env_makers(config)[0])
    script = "import pickle, sys; pickle.loads(sys.stdin.buffer.read()); print('lightning' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", script], input=maker, capture_output=True, check=True)
    assert result.stdout.decode().split() == ["False"]
