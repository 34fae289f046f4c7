"""SAC trains on the batched twin: an [envs, time] rollout goes into the replay buffer as flat transitions."""

from __future__ import annotations

from pathlib import Path

import torch
from agents_testkit import cpu_trainer

from iquitos_lightning.agents import SAC, EnvConfig, ReplayBufferConfig, RolloutConfig
from iquitos_lightning.control.residual import ResidualAction
from iquitos_lightning.envs.env_config import Backend, TrainingAids
from iquitos_lightning.envs.hindsight import HINDSIGHT

TINY = str(Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml")


def test_sac_on_a_batched_twin_stores_flat_transitions(tmp_path):
    agent = SAC(
        env=EnvConfig(site=TINY, backend=Backend(train="twin", num_envs=4, data_root=str(tmp_path / "data"))),
        rollout=RolloutConfig(frame_budget=64, frames_per_batch=32, eval_every_frames=64, eval_episodes=0),
        buffer=ReplayBufferConfig(capacity=1_000),
        hidden_sizes=(16, 16),
        batch_size=16,
        init_random_frames=32,
    )
    cpu_trainer(limit_val_batches=0).fit(agent)

    assert agent.frames_done == 64 and len(agent.replay_buffer) == 64
    stored = agent.replay_buffer.storage.get(slice(0, 64))
    assert stored.batch_size == (64,)  # one item per transition, not one per env's 8-step trajectory
    assert stored["observation"].shape == (64, agent.train_env.observation_spec["observation"].shape[-1])
    assert agent.updates_done == 64  # one update per frame from the batch that completes the random frames on


def residual_sac(tmp_path: Path, **overrides) -> SAC:
    return SAC(
        env=EnvConfig(
            site=TINY,
            layout="fleet",
            residual="rule",
            backend=Backend(train="twin", num_envs=4, data_root=str(tmp_path / "data")),
        ),
        rollout=RolloutConfig(frame_budget=64, frames_per_batch=32, eval_every_frames=64, eval_episodes=0),
        buffer=ReplayBufferConfig(capacity=1_000),
        hidden_sizes=(16, 16),
        batch_size=16,
        init_random_frames=0,
        **overrides,
    )


def test_a_zero_mean_start_acts_exactly_as_the_rule(tmp_path):
    from tensordict.nn import InteractionType, set_interaction_type

    agent = residual_sac(tmp_path, zero_mean_start=True, initial_scale=0.1)
    state = agent.train_env.reset()
    with set_interaction_type(InteractionType.DETERMINISTIC):
        action = agent.actor(state.clone())["action"]
    assert action.abs().max().item() == 0.0  # residual 0 = the rule-based controller (tests/control/test_residual.py)
    assert isinstance(agent.train_env.transform, ResidualAction)  # the wrapper above the env maps it around the rule
    scale = agent.actor.module[0](state.clone())["scale"]
    assert torch.allclose(scale, torch.full_like(scale, 0.1))

    fresh = residual_sac(tmp_path)  # the default start: a random network, whose mean is not 0
    with set_interaction_type(InteractionType.DETERMINISTIC):
        assert fresh.actor(state.clone())["action"].abs().max().item() > 0.0


def test_actor_delay_trains_the_critic_only(tmp_path):
    def parameters(module: torch.nn.Module) -> list[torch.Tensor]:
        return [p.detach().clone() for p in module.parameters()]

    for delay, actor_moves in ((1_000, False), (0, True)):
        agent = residual_sac(tmp_path, zero_mean_start=True, actor_delay_frames=delay)
        actor_before = parameters(agent.actor)
        critic_before = parameters(agent.loss_module.qvalue_network_params)
        cpu_trainer(limit_val_batches=0).fit(agent)
        assert agent.updates_done > 0
        actor_changed = any(not torch.equal(a, b) for a, b in zip(actor_before, parameters(agent.actor), strict=True))
        critic_after = parameters(agent.loss_module.qvalue_network_params)
        assert any(not torch.equal(a, b) for a, b in zip(critic_before, critic_after, strict=True))
        assert actor_changed is actor_moves


def test_the_residual_penalty_pulls_the_policy_mean_to_the_rule(tmp_path):
    def mean_abs_loc(agent: SAC) -> float:
        state = agent.train_env.reset()
        return agent.actor.module[0](state.clone())["loc"].abs().mean().item()

    torch.manual_seed(0)
    held = residual_sac(tmp_path, residual_penalty=1_000.0, actor_lr=1e-2)  # a random start: mean off 0
    before = mean_abs_loc(held)
    cpu_trainer(limit_val_batches=0).fit(held)
    assert mean_abs_loc(held) < 0.1 * before

    torch.manual_seed(0)
    free = residual_sac(tmp_path, actor_lr=1e-2)
    cpu_trainer(limit_val_batches=0).fit(free)
    assert mean_abs_loc(free) > 0.3 * before


def test_the_automatic_target_entropy_counts_one_envs_actions_not_the_batchs(tmp_path):
    """TorchRL's "auto" is minus the product of the whole action spec: for 4 twin envs of 2 actions it would ask
    for -8 and drive the entropy coefficient to 0; the agent asks for -2, one env's actions."""
    agent = residual_sac(tmp_path)
    assert tuple(agent.train_env.action_spec.shape) == (4, 2)
    assert float(agent.loss_module.target_entropy) == -2.0
    assert float(residual_sac(tmp_path, target_entropy=-0.5).loss_module.target_entropy) == -0.5


def test_storing_only_what_sac_reads_trains_the_weights_storing_everything_does(tmp_path, monkeypatch):
    """With the critic's hindsight (a Q input the library's ``in_keys`` leaves out at the next state) and 3-step
    returns (the estimator's step count), the lean buffer (SAC.stored_keys) gives the same weights, bit for bit, as
    one that keeps every entry: nothing an update reads is left out."""

    def fit() -> SAC:
        torch.manual_seed(0)
        agent = SAC(
            env=EnvConfig(
                site=TINY,
                backend=Backend(train="twin", num_envs=4, data_root=str(tmp_path / "data")),
                training=TrainingAids(critic_forecasts="oracle"),
            ),
            rollout=RolloutConfig(frame_budget=96, frames_per_batch=32, eval_every_frames=96, eval_episodes=0),
            buffer=ReplayBufferConfig(capacity=1_000),
            hidden_sizes=(16, 16),
            batch_size=16,
            init_random_frames=32,
            n_steps=3,
        )
        cpu_trainer(limit_val_batches=0).fit(agent)
        assert agent.updates_done == 96  # one per frame from the batch that completes the random frames on
        return agent

    lean = fit()
    stored = set(lean.replay_buffer.storage.get(slice(0, 1)).keys(include_nested=True, leaves_only=True))
    assert {("next", HINDSIGHT), "steps_to_next_obs"} <= stored
    assert "loc" not in stored
    monkeypatch.setattr(SAC, "stored_keys", lambda self: None)  # every entry but the collector's
    everything = fit()
    assert "loc" in everything.replay_buffer.storage.get(slice(0, 1)).keys()
    for name, tensor in lean.state_dict().items():
        assert torch.equal(tensor, everything.state_dict()[name]), name
