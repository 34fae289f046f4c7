"""The lean PPO loss (fastpath/lean_ppo_loss.py) equals TorchRL's ``ClipPPOLoss.forward`` bit for bit."""

from __future__ import annotations

import pytest
import torch
from torchrl.objectives import ClipPPOLoss

from iquitos_lightning.agents import PPO
from iquitos_lightning.fastpath.lean_ppo_loss import LEAN_KEYS
from tests.agents.agents_testkit import POLICY_PARAMETERISATIONS, loss_terms_and_gradients, moved_after_collecting


def moved_policy_minibatch(**agent_options):
    """A PPO agent whose actor moved after it collected a rollout, and the rollout with its advantages as one
    minibatch of the keys the update reads: half its rows with ratios far from 1, half at 1."""
    agent, data = moved_after_collecting(PPO, lambda agent: agent.actor, **agent_options)
    with torch.no_grad():
        # the first half of the rows as if collected by the moved policy: ratio 1, inside the clip
        half = data.numel() // 2
        moved_log_prob = agent.actor.get_dist(data[:half]).log_prob(data["action"][:half])
        data["action_log_prob"][:half] = moved_log_prob
    return agent, data


@pytest.mark.parametrize("agent_options", list(POLICY_PARAMETERISATIONS.values()), ids=list(POLICY_PARAMETERISATIONS))
def test_the_terms_and_gradients_equal_the_librarys_forward_on_a_moved_policy(agent_options):
    agent, data = moved_policy_minibatch(**agent_options)
    lean, lean_gradients = loss_terms_and_gradients(agent, type(agent.loss_module).forward, data, LEAN_KEYS)
    library, library_gradients = loss_terms_and_gradients(agent, ClipPPOLoss.forward, data, LEAN_KEYS)
    assert agent.loss_module._modules_run_directly()  # the fast path ran, not the fallback
    assert 0.05 < float(library["clip_fraction"]) < 0.95, float(library["clip_fraction"])  # both sides of the clip
    for key in LEAN_KEYS:
        assert torch.equal(lean[key], library[key]), key
    assert len(lean_gradients) == len(library_gradients) == len(list(agent.loss_module.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(lean_gradients, library_gradients, strict=True))
    agent.to("cpu")  # a device move asks again whether the parameters are the modules' own
    assert agent.loss_module._direct is None


def test_a_configuration_it_does_not_cover_gets_the_librarys_forward():
    agent, data = moved_policy_minibatch(entropy_coef=0.01)
    out = agent.loss_module(data)
    assert "loss_entropy" in out.keys() and "ESS" in out.keys()  # the library's forward, every key
