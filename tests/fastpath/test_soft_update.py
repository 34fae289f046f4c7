"""The foreach soft update moves SAC's target networks exactly as TorchRL's SoftUpdate does."""

from __future__ import annotations

import copy

import pytest
import torch
from torchrl.objectives import SACLoss, SoftUpdate

from iquitos_lightning.agents import EnvConfig
from iquitos_lightning.agents.networks import initialise_lazy, make_actor, make_q_value
from iquitos_lightning.envs.factory import make_env
from iquitos_lightning.fastpath.soft_update import ForeachSoftUpdate


def _sac_loss() -> SACLoss:
    env = make_env(EnvConfig(name="Pendulum-v1"))
    actor = make_actor(env, (16, 16), "relu", return_log_prob=False)
    q_value = make_q_value(env, (16, 16), "relu")
    initialise_lazy(env, actor, q_value)
    return SACLoss(actor_network=actor, qvalue_network=q_value, num_qvalue_nets=2, action_spec=env.action_spec)


def _move_online_weights(loss: SACLoss, seed: int) -> None:
    """An "optimizer step": the same pseudo-random change to every online parameter of either copy."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in loss.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator))


@pytest.mark.parametrize("tau", [0.005, 0.3])
def test_foreach_soft_update_gives_softupdates_targets_bit_for_bit(tau: float) -> None:
    torchrl_loss = _sac_loss()
    ours_loss = copy.deepcopy(torchrl_loss)
    torchrl_updater, ours_updater = SoftUpdate(torchrl_loss, tau=tau), ForeachSoftUpdate(ours_loss, tau=tau)
    start = {key: value.clone() for key, value in ours_loss.state_dict().items()}
    target_keys = [key for key in start if key.startswith("target_")]
    assert target_keys, "SACLoss keeps target copies of the Q networks"
    for step in range(5):
        _move_online_weights(torchrl_loss, step)
        _move_online_weights(ours_loss, step)
        torchrl_updater.step()
        ours_updater.step()
    torchrl_state, ours_state = torchrl_loss.state_dict(), ours_loss.state_dict()
    for key in target_keys:
        assert not torch.equal(ours_state[key], start[key]), f"{key} did not move"
        assert torch.equal(ours_state[key], torchrl_state[key]), key
