"""The on-policy clip reuses the norm the non-finite check computed over the same gradients: the weights after a
fit whose every update is clipped equal those of the clip computing its own norm, bit for bit."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch

from iquitos_lightning.agents import A2C, PPO, EnvConfig, RolloutConfig
from iquitos_lightning.envs.env_config import Backend
from tests.agents.agents_testkit import cpu_trainer

TINY = str(Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml")


def fitted_weights(agent_class, tmp_path: Path, share_norm: bool) -> tuple[dict[str, torch.Tensor], list[float], int]:
    """Weights after a short fit with a clip far below the gradients' norm, the health signal's gradient norms, and
    how many clips reused the check's norm."""
    pl.seed_everything(0, verbose=False)
    extra = {"minibatch_size": 32, "epochs": 2} if agent_class is PPO else {}
    agent = agent_class(
        env=EnvConfig(site=TINY, data_root=str(tmp_path / "data"), seed=0, backend=Backend(train="twin", num_envs=4)),
        rollout=RolloutConfig(frame_budget=192, frames_per_batch=64, eval_every_frames=192, eval_episodes=0),
        hidden_sizes=(16, 16),
        max_grad_norm=1e-3,  # every update clipped
        **extra,
    )
    reused = []
    if share_norm:
        keep = agent.keep_checked_gradient_norm
        agent.keep_checked_gradient_norm = lambda norm: reused.append(norm is not None) or keep(norm)
    else:
        agent.keep_checked_gradient_norm = lambda norm: None  # the clip computes its own norm
    norms: list[float] = []
    record = agent.on_before_optimizer_step

    def recording(optimizer):
        record(optimizer)
        norms.append(float(agent._gradient_norms[-1]))

    agent.on_before_optimizer_step = recording
    cpu_trainer().fit(agent)
    return {k: v.clone() for k, v in agent.state_dict().items()}, norms, sum(reused)


@pytest.mark.parametrize("agent_class", [PPO, A2C], ids=["ppo", "a2c"])
def test_the_clip_with_the_checks_norm_gives_the_weights_of_the_clip_computing_its_own(agent_class, tmp_path: Path):
    shared, shared_norms, reused = fitted_weights(agent_class, tmp_path, share_norm=True)
    own, own_norms, _ = fitted_weights(agent_class, tmp_path, share_norm=False)
    assert reused == len(shared_norms) > 0  # every step's clip read the check's norm
    assert min(shared_norms) > 1e-3  # the clip was active on every update
    assert shared_norms == own_norms
    assert shared.keys() == own.keys()
    assert all(torch.equal(shared[key], own[key]) for key in shared)
