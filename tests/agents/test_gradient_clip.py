"""The on-policy clip uses the norm the non-finite check computed over the same gradients, passed as a value: the step
equals torch's own ``clip_grad_norm_`` and step bit for bit, and a fit logs that norm as a health signal."""

from __future__ import annotations

import copy
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch

from iquitos_lightning.agents import A2C, PPO, EnvConfig, RolloutConfig
from iquitos_lightning.agents.guards import backward_and_step
from iquitos_lightning.envs.env_config import Backend, Episodes
from tests.agents.agents_testkit import BatchRecorder, cpu_trainer

TINY = str(Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml")


@pytest.mark.parametrize("clip_to", [1e-3, 0.0], ids=["clipped", "measured_only"])
def test_the_checked_step_clips_and_steps_as_torchs_clip_grad_norm(clip_to: float):
    torch.manual_seed(0)
    network = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    reference = copy.deepcopy(network)
    inputs = torch.randn(32, 4)
    optimizer, reference_optimizer = torch.optim.Adam(network.parameters()), torch.optim.Adam(reference.parameters())

    loss = network(inputs).square().mean()
    step = backward_and_step(
        [optimizer], torch.Tensor.backward, loss, {"loss_square": loss.detach()}, ("loss_square",),
        check=True, gradients_checked_by_scaler=False, clip_to=clip_to,
    )  # fmt: skip

    reference_optimizer.zero_grad()
    reference(inputs).square().mean().backward()
    parameters = list(reference.parameters())
    norm = (
        torch.nn.utils.clip_grad_norm_(parameters, clip_to)
        if clip_to
        else torch.nn.utils.get_total_norm([p.grad for p in parameters])
    )
    reference_optimizer.step()

    assert step.applied and step.gradient_norm is not None
    assert torch.equal(step.gradient_norm, norm) and float(norm) > 1e-3  # the clip was active
    pairs = zip(network.parameters(), reference.parameters(), strict=True)
    assert all(torch.equal(ours, theirs) for ours, theirs in pairs)


def test_a_non_finite_gradient_skips_the_step_and_says_which_term():
    network = torch.nn.Linear(3, 1)
    before = [p.detach().clone() for p in network.parameters()]
    optimizer = torch.optim.Adam(network.parameters())
    loss = network(torch.tensor([[1.0, float("inf"), 0.0]])).sum() * 0  # inf x 0: a NaN loss
    step = backward_and_step(
        [optimizer], torch.Tensor.backward, loss, {"loss_x": loss.detach()}, ("loss_x",),
        check=True, gradients_checked_by_scaler=False, clip_to=0.5,
    )  # fmt: skip
    assert not step.applied and step.fault == "loss_x"
    assert all(torch.equal(p, q) for p, q in zip(network.parameters(), before, strict=True))


@pytest.mark.parametrize("agent_class", [PPO, A2C], ids=["ppo", "a2c"])
def test_every_rollout_logs_the_mean_gradient_norm_before_the_clip(agent_class, tmp_path: Path):
    pl.seed_everything(0, verbose=False)
    extra = {"minibatch_size": 32, "epochs": 2} if agent_class is PPO else {}
    agent = agent_class(
        env=EnvConfig(
            site=TINY,
            backend=Backend(train="twin", num_envs=4, data_root=str(tmp_path / "data")),
            episodes=Episodes(seed=0),
        ),
        rollout=RolloutConfig(frame_budget=192, frames_per_batch=64, eval_every_frames=192, eval_episodes=0),
        hidden_sizes=(16, 16),
        max_grad_norm=1e-3,  # every update clipped
        **extra,
    )
    recorder = BatchRecorder()
    cpu_trainer(callbacks=[recorder]).fit(agent)
    norms = [outputs["health/gradient_norm"] for outputs in recorder.outputs.values()]
    assert len(norms) == 3 and min(norms) > 1e-3  # the norm before the clip, which was active on every update
