"""The lean A2C loss (fastpath/lean_a2c_loss.py) equals TorchRL's ``A2CLoss.forward`` bit for bit."""

from __future__ import annotations

import pytest
import torch
from torchrl.objectives import A2CLoss

from iquitos_lightning.agents import A2C
from tests.agents.agents_testkit import POLICY_PARAMETERISATIONS, loss_terms_and_gradients, moved_after_collecting

TERMS = ("loss_objective", "loss_critic")


def moved_policy_rollout(**agent_options):
    """An A2C agent whose actor and critic moved after it collected a rollout, and the rollout with its advantages
    as the update reads it (the library's and the lean forward must score the actions with the moved weights)."""
    return moved_after_collecting(A2C, lambda agent: agent.loss_module, **agent_options)


@pytest.mark.parametrize("agent_options", list(POLICY_PARAMETERISATIONS.values()), ids=list(POLICY_PARAMETERISATIONS))
def test_the_terms_and_gradients_equal_the_librarys_forward_on_a_moved_policy(agent_options):
    agent, data = moved_policy_rollout(**agent_options)
    lean, lean_gradients = loss_terms_and_gradients(agent, type(agent.loss_module).forward, data, TERMS)
    library, library_gradients = loss_terms_and_gradients(agent, A2CLoss.forward, data, TERMS)
    assert agent.loss_module._lean_applies(data)  # the fast path ran, not the fallback
    for key in TERMS:
        assert torch.equal(lean[key], library[key]), key
    assert float(lean["loss_objective"].abs()) > 0 and float(lean["loss_critic"]) > 0  # real terms, not zeros
    assert len(lean_gradients) == len(library_gradients) == len(list(agent.loss_module.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(lean_gradients, library_gradients, strict=True))


def test_a_configuration_it_does_not_cover_gets_the_librarys_forward():
    agent, data = moved_policy_rollout(entropy_coef=0.01)
    assert not agent.loss_module._lean_applies(data)
    out = agent.loss_module(data)
    assert "loss_entropy" in out.keys() and "entropy" in out.keys()  # the library's forward, every key
