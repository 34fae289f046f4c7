"""Health signals of learning (agents/health.py) and the warning when learning stalls (callbacks/health.py).

The Done-when of the agents-that-learn issue: a frozen policy (learning rate 0) raises the warning and a learning
one does not, for an on-policy and an off-policy agent, on real Pendulum runs of a few seconds.
"""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from agents_testkit import cpu_trainer, small_sac

from iquitos_lightning.agents import PPO, EnvConfig, RolloutConfig
from iquitos_lightning.agents.health import approximate_kl, current_log_prob, explained_variance, policy_spread
from iquitos_lightning.envs.env_config import Episodes
from iquitos_lightning.envs.factory import make_env
from iquitos_lightning.training.callbacks import LearningHealth, RunReport


def small_ppo(lr: float, frame_budget: int = 4096, **options) -> PPO:
    """PPO on Pendulum with one health period (evaluation period) every 2,048 frames."""
    return PPO(
        env=EnvConfig(name="Pendulum-v1", episodes=Episodes(seed=1, max_steps=200)),
        rollout=RolloutConfig(
            frame_budget=frame_budget, frames_per_batch=1024, eval_every_frames=2048, eval_episodes=0
        ),
        lr=lr,
        gamma=0.9,
        minibatch_size=64,
        epochs=10,
        **options,
    )


def fit_with_health(agent: pl.LightningModule, tmp_path) -> tuple[LearningHealth, RunReport]:
    torch.set_num_threads(1)
    health = LearningHealth()
    report = RunReport(dirpath=str(tmp_path / "report"), dispatch_plot=False)
    cpu_trainer(callbacks=[health, report]).fit(agent)
    return health, report


@pytest.mark.parametrize("learning_rate", [0.0, 1e-3])
def test_ppo_warns_when_frozen_and_not_when_learning(learning_rate, tmp_path):
    pl.seed_everything(0)
    health, report = fit_with_health(small_ppo(learning_rate), tmp_path)
    kinds = [warning.split(":")[0] for warning in health.warnings]
    if learning_rate == 0:
        assert kinds == ["policy", "critic"], health.warnings  # did not move, and a random critic explains nothing
        assert all(row["approx_kl"] == pytest.approx(0.0, abs=1e-6) for row in report.health)
    else:
        assert kinds == [], health.warnings
        assert report.health[-1]["explained_variance"] > 0.5  # the critic fits Pendulum's returns within 4 rollouts
        assert all(row["approx_kl"] > 1e-4 for row in report.health)
    drifts = [row["policy_drift"] for row in report.health if "policy_drift" in row]
    assert len(drifts) == 2  # one per evaluation period of 2,048 frames
    assert (max(drifts) == 0.0) == (learning_rate == 0)
    expected = {"explained_variance", "advantage_std", "value_target_std", "policy_scale", "clip_fraction"}
    assert expected <= set(report.health[0])
    written = {path.name for path in (tmp_path / "report").iterdir()}
    assert {"health.png", "health.csv"} <= written


def test_ppo_warns_when_its_actions_sit_at_the_bounds(tmp_path):
    """A Gaussian scale of 10 before the tanh puts ~80 % of the sampled actions within 1 % of an end of the range
    (the learning run above, scale 1, stays clear of the warning). One health period: the warning is the first
    period's."""
    pl.seed_everything(0)
    health, report = fit_with_health(small_ppo(1e-3, frame_budget=2048, initial_scale=10.0), tmp_path)
    assert "bounds" in [warning.split(":")[0] for warning in health.warnings], health.warnings
    assert report.health[0]["actions_at_bounds"] > 0.5


@pytest.mark.parametrize("learning_rate", [0.0, 1e-3])
def test_sac_warns_when_frozen_and_not_when_learning(learning_rate, tmp_path):
    pl.seed_everything(0)
    agent = small_sac(400, actor_lr=learning_rate, critic_lr=learning_rate, alpha_lr=learning_rate)
    health, report = fit_with_health(agent, tmp_path)
    assert [warning.split(":")[0] for warning in health.warnings] == (["policy"] if learning_rate == 0 else [])
    last = report.health[-1]
    assert {"q_mean", "q_std", "q_twin_gap", "target_q_mean", "alpha", "actor_gradient_norm"} <= set(last)
    assert (last["alpha"] == 1.0) == (learning_rate == 0)  # alpha_init 1.0 moves only when alpha learns
    assert last["critic_gradient_norm"] > 0


def test_explained_variance_by_hand():
    target = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(target, target) == pytest.approx(1.0)
    assert explained_variance(torch.full((4,), 2.5), target) == pytest.approx(0.0)
    # residuals [1, -1, 1, -1]: variance 1 against the targets' 1.25
    assert explained_variance(target + torch.tensor([1.0, -1.0, 1.0, -1.0]), target) == pytest.approx(1 - 1 / 1.25)


def test_policy_spread_counts_actions_at_the_bounds():
    low, high = torch.tensor([-2.0, 0.0]), torch.tensor([2.0, 10.0])
    action = torch.tensor([[-2.0, 5.0], [1.99, 9.95], [0.0, 0.0]])  # 1.99 is within 1 % of 4 from 2; 9.95 of 10
    spread = policy_spread(torch.zeros(3, 2), torch.ones(3, 2), action, low, high)
    assert spread["actions_at_bounds"] == pytest.approx(4 / 6)
    assert spread["policy_scale"] == pytest.approx(1.0)
    assert spread["entropy_per_dim"] == pytest.approx(0.5 * torch.log(torch.tensor(2 * torch.pi * torch.e)).item())


def test_approximate_kl_is_zero_for_the_collecting_policy_and_positive_after_a_change():
    pl.seed_everything(0)
    agent = small_ppo(1e-3)
    env = make_env(agent.env_config)
    with torch.no_grad():
        data = env.rollout(64, agent.actor)
    assert approximate_kl(agent.actor, data) == pytest.approx(0.0, abs=1e-6)
    saturated = data.clone()
    saturated["action"][:8] = 2.0  # Pendulum's bound: atanh cannot recover what was sampled there
    assert approximate_kl(agent.actor, saturated) == pytest.approx(0.0, abs=1e-6)  # left out, not read as KL
    with torch.no_grad():
        for parameter in agent.actor.parameters():
            parameter.add_(0.5 * torch.randn_like(parameter))
    assert approximate_kl(agent.actor, data) > 1e-4


@pytest.mark.parametrize("distribution", ["tanh_normal", "normal"])
def test_the_current_log_probability_equals_the_distributions(distribution):
    """The KL's log-probability on tensors (a TanhNormal on Pendulum's bounds of +-2) equals the distribution's
    ``log_prob`` bit for bit, for a moved policy; a plain Gaussian goes through the distribution itself."""
    pl.seed_everything(0)
    agent = PPO(env=EnvConfig(name="Pendulum-v1", episodes=Episodes(seed=1)), distribution=distribution, lr=1e-3)
    with torch.no_grad():
        data = make_env(agent.env_config).rollout(64, agent.actor)
        for parameter in agent.actor.parameters():
            parameter.add_(0.3 * torch.randn_like(parameter))
        expected = agent.actor.get_dist(data.select(*agent.actor.in_keys)).log_prob(data["action"])
        assert torch.equal(current_log_prob(agent.actor, data, data["action"]), expected)
