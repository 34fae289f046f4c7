"""The lean SAC loss (fastpath/lean_sac_loss.py) equals TorchRL's ``SACLoss.forward`` bit for bit."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torchrl.objectives import SACLoss

from iquitos_lightning.agents import SAC, EnvConfig, RolloutConfig
from iquitos_lightning.agents.replay import ReplayBufferConfig
from iquitos_lightning.envs.env_config import Backend, Episodes, TrainingAids

SITE = EnvConfig(
    name="iquitos", site="configs/site/tiny.yaml", backend=Backend(train="twin", num_envs=4), episodes=Episodes(seed=0)
)
TERMS = ("loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy")


def agent_and_batch(critic_forecasts: str | None = None) -> tuple[SAC, object]:
    """SAC on the tiny site's twin (asymmetric action bounds) with a learning entropy weight and Q networks moved
    off their targets, and 64 transitions it collected, some marked terminal so the target's bootstrap is cut.
    ``critic_forecasts="oracle"``: the Q networks also read the twin's hindsight (envs/hindsight.py)."""
    torch.manual_seed(0)
    agent = SAC(
        env=dataclasses.replace(SITE, training=TrainingAids(critic_forecasts=critic_forecasts)),
        rollout=RolloutConfig(frames_per_batch=64, eval_every_frames=64),
        buffer=ReplayBufferConfig(capacity=1_000),
        hidden_sizes=(16, 16),
        batch_size=64,
        alpha_init=0.3,
    )
    with torch.no_grad():
        batch = agent.train_env.rollout(16, agent.actor, break_when_any_done=False).reshape(-1)
        for parameter in agent.loss_module.qvalue_network_params.values(True, True):  # Q moved off its target
            parameter.add_(0.1 * torch.randn_like(parameter))
    batch["next", "terminated"][::7] = True
    return agent, batch


def terms_gradients_priority(agent: SAC, forward, batch) -> tuple[dict, list, torch.Tensor]:
    agent.loss_module.zero_grad()
    data = batch.clone()
    torch.manual_seed(1)  # both forwards draw the target's and the actor's actions from the same generator state
    out = forward(agent.loss_module, data)
    (out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"]).backward()
    gradients = [None if p.grad is None else p.grad.clone() for p in agent.loss_module.parameters()]
    return {key: out[key].detach() for key in TERMS}, gradients, data["td_error"]


@pytest.mark.parametrize("critic_forecasts", [None, "oracle"], ids=["observation", "with_hindsight"])
@pytest.mark.parametrize("q_through_vmap", [False, True], ids=["q_as_matmuls", "q_through_vmap"])
def test_the_terms_gradients_and_priorities_equal_the_librarys_forward(q_through_vmap, critic_forecasts):
    agent, batch = agent_and_batch(critic_forecasts)
    q_inputs = ["observation", "hindsight", "action"] if critic_forecasts else ["observation", "action"]
    assert list(agent.loss_module.qvalue_network.in_keys) == q_inputs
    if q_through_vmap:  # the path of a Q network that is not a plain MLP
        agent.loss_module._q_plan = False
    assert (agent.loss_module._q_layers() is None) == q_through_vmap
    lean, lean_gradients, lean_priority = terms_gradients_priority(agent, type(agent.loss_module).forward, batch)
    library, library_gradients, library_priority = terms_gradients_priority(agent, SACLoss.forward, batch)
    assert agent.loss_module._lean_applies(batch)  # the fast path ran, not the fallback
    assert float(lean["loss_alpha"]) != 0.0 and float(library["loss_qvalue"]) > 0.0
    for key in TERMS:
        assert torch.equal(lean[key], library[key]), key
    assert sum(gradient is not None for gradient in lean_gradients) >= 7  # actor, both Q networks, log alpha
    for a, b in zip(lean_gradients, library_gradients, strict=True):
        assert (a is None and b is None) or torch.equal(a, b)
    assert torch.equal(lean_priority, library_priority)
    agent.to("cpu")  # a device move asks again whether the actor's parameters are the module's own
    assert agent.loss_module._direct is None


def test_a_configuration_it_does_not_cover_gets_the_librarys_forward():
    agent, batch = agent_and_batch()
    agent.loss_module.skip_done_states = True
    assert not agent.loss_module._lean_applies(batch)
    out = agent.loss_module(batch)
    assert set(TERMS) <= set(out.keys())


def test_after_loading_other_weights_and_a_soft_update_it_still_equals_the_librarys_forward():
    """The lean forward keeps each parameter set's tensors by name between calls: a checkpoint's weights (loaded in
    place) and the targets' soft update must reach it, or it would score with the weights it first saw."""
    agent, batch = agent_and_batch()
    terms_gradients_priority(agent, type(agent.loss_module).forward, batch)  # the tensors are kept from here
    state = {key: value + 0.05 if value.is_floating_point() else value for key, value in agent.state_dict().items()}
    agent.load_state_dict(state)
    agent._target_updater.value.step()
    lean, _, _ = terms_gradients_priority(agent, type(agent.loss_module).forward, batch)
    library, _, _ = terms_gradients_priority(agent, SACLoss.forward, batch)
    for key in TERMS:
        assert torch.equal(lean[key], library[key]), key
