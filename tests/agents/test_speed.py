"""The fast-path switches on the CPU: compile runs the update and learns the same; CUDA graphs fall back with one
message; what each GPU setting allows is a pure plan (tested with a described CUDA device)."""

from __future__ import annotations

import warnings

import pytest
import torch
from agents_testkit import BatchRecorder, cpu_trainer, small_sac

from iquitos_lightning.agents import PPO, EnvConfig, RolloutConfig
from iquitos_lightning.agents.speed import SpeedConfig, plan_speed

CUDA = torch.device("cuda")  # a description: nothing runs on it


def test_cuda_graphs_are_planned_only_where_they_can_run():
    wanted = SpeedConfig(cuda_graphs=True)
    assert plan_speed(wanted, CUDA, "bf16-mixed", fixed_shapes=True).speed.cuda_graphs
    assert plan_speed(wanted, CUDA, "32-true", fixed_shapes=True).notes == ()
    on_cpu = plan_speed(wanted, torch.device("cpu"), "32-true", fixed_shapes=True)
    assert not on_cpu.speed.cuda_graphs and "needs a CUDA device" in on_cpu.notes[0]
    scaled = plan_speed(wanted, CUDA, "16-mixed", fixed_shapes=True)
    assert not scaled.speed.cuda_graphs and "bf16-mixed" in scaled.notes[0]
    ragged = plan_speed(wanted, CUDA, "bf16-mixed", fixed_shapes=False)
    assert not ragged.speed.cuda_graphs and "multiple of" in ragged.notes[0]
    assert plan_speed(SpeedConfig(compile=True, tf32=True), torch.device("cpu"), "32-true", True).speed.compile


def test_ppo_updates_have_a_fixed_shape_only_when_the_rollout_splits_evenly():
    def ppo(minibatch_size: int) -> PPO:
        rollout = RolloutConfig(frames_per_batch=128, eval_every_frames=128)
        return PPO(env=EnvConfig(name="Pendulum-v1"), rollout=rollout, minibatch_size=minibatch_size)

    assert ppo(64).fixed_update_shapes() and not ppo(48).fixed_update_shapes()


def test_cuda_graphs_on_the_cpu_train_without_them_and_say_so_once():
    torch.manual_seed(0)
    agent = small_sac(150, speed=SpeedConfig(cuda_graphs=True))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cpu_trainer().fit(agent)
    messages = [str(w.message) for w in caught if "cuda_graphs" in str(w.message)]
    assert len(messages) == 1 and "needs a CUDA device" in messages[0]
    assert agent.planned_speed == SpeedConfig(cuda_graphs=False)  # what ran, readable after fit (benchmarks' label)
    assert agent.updates_done == 150  # one update per frame once the first 50 random frames are stored
    capturable = [group["capturable"] for optimizer in agent.trainer.optimizers for group in optimizer.param_groups]
    assert not any(capturable)  # capturable Adam only where a graph will be captured


def _losses_after_training(compile_update: bool) -> dict[str, float]:
    torch.manual_seed(0)
    agent = small_sac(100, speed=SpeedConfig(compile=compile_update))
    recorder = BatchRecorder()
    cpu_trainer(callbacks=[recorder]).fit(agent)
    assert agent.updates_done == 100
    return recorder.outputs[100]


@pytest.mark.slow
def test_compiled_update_runs_on_the_cpu_and_gives_the_eager_losses(monkeypatch):
    # Inductor draws random numbers its own way by default (the policy samples inside the loss): draw them as
    # eager does, so the two runs differ only by how the same arithmetic is compiled.
    import torch._inductor.config

    monkeypatch.setattr(torch._inductor.config, "fallback_random", True)
    eager = _losses_after_training(compile_update=False)
    torch._dynamo.utils.counters.clear()
    compiled = _losses_after_training(compile_update=True)
    # compiled once for the whole run (two learning rollouts here): the losses read the frame counter until they
    # were compiled anew at every rollout, up to dynamo's limit of 8, then ran eager (a 196k-frame run did)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    for key in ("train/loss_actor", "train/loss_qvalue", "train/loss_alpha"):
        assert torch.isfinite(torch.tensor(compiled[key]))
        assert compiled[key] == pytest.approx(eager[key], rel=1e-3, abs=1e-4), key


def test_speed_threads_sets_torchs_cpu_threads_for_the_fit():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        agent = small_sac(100, speed=SpeedConfig(threads=1))
        cpu_trainer().fit(agent)
        assert torch.get_num_threads() == 1 and agent.updates_done == 100
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError, match="speed.threads must be at least 1"):
        SpeedConfig(threads=0)


def test_moving_an_agent_moves_its_actors_distribution_bounds_too():
    """TorchRL keeps TanhNormal's bounds in a dict ``.to`` does not walk; on a GPU they stayed on the host and
    every forward copied them, which a CUDA-graph capture refuses. A cast shows the same path on the CPU."""
    agent = small_sac(100)
    bounds = [
        module.distribution_kwargs
        for module in agent.modules()
        if isinstance(getattr(module, "distribution_kwargs", None), dict) and module.distribution_kwargs
    ]
    assert bounds  # the actor (and the loss module's copy, if any) carry low/high
    agent.double()
    assert all(value.dtype == torch.float64 for kwargs in bounds for value in kwargs.values())
    assert float(bounds[0]["high"].max()) == 2.0  # Pendulum's torque bound, unchanged by the move


def test_fused_adam_steps_every_optimizer_with_the_fused_kernel_and_learns_what_foreach_learns():
    """``speed.fused_adam``: the same algorithm through torch's fused kernel; the weights after 100 SAC updates
    agree with the foreach run's to float rounding, not necessarily bit for bit."""
    weights = {}
    for fused in (False, True):
        torch.manual_seed(0)
        agent = small_sac(100, speed=SpeedConfig(fused_adam=fused))
        cpu_trainer().fit(agent)
        optimizers = agent.trainer.optimizers
        assert len(optimizers) == 1 and len(optimizers[0].param_groups) == 3  # actor, critic, alpha
        assert all(o.defaults["fused"] is (True if fused else None) for o in optimizers)
        assert all(o.defaults["foreach"] is (None if fused else True) for o in optimizers)
        weights[fused] = torch.cat([p.detach().flatten() for p in agent.loss_module.parameters()])
    assert agent.updates_done == 100
    torch.testing.assert_close(weights[True], weights[False], rtol=1e-4, atol=1e-5)
