"""The learner section (issue 31): it runs end to end on the tiny site and prints ours, plain and their ratio with a
time-share table; its plain loops count frames and updates as ours do, train their weights, and compute what
TorchRL computes for our agents (the tanh-Gaussian log-density, GAE, the return std)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torchrl.modules import TanhNormal
from torchrl.objectives.value.functional import generalized_advantage_estimate

from benchmarks.bench.learner import LearnerConfig, LearnerResult, LearnerRow
from benchmarks.bench.learner_profile import ROWS as PHASE_ROWS
from benchmarks.bench.plain_loops import (
    OnPolicySettings,
    ReturnStd,
    SACSettings,
    gae,
    on_policy_networks,
    tanh_log_prob,
    train_on_policy,
    train_sac,
)
from benchmarks.bench.report import learner_section
from benchmarks.bench.run import BenchConfig, learner_compiles, run_bench
from iquitos_lightning.agents.reward_normalizer import RewardNormalizer
from iquitos_lightning.envs.twin import IquitosTwin, make_twin

TINY = "configs/site/tiny.yaml"


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture
def twin(data_root: Path) -> IquitosTwin:
    """4 envs of the profiles' task with 24-hour episodes, so that rollouts cross partial resets."""
    return make_twin(
        TINY,
        data_root=data_root,
        num_envs=4,
        layout="fleet",
        objective="tariff",
        start="staggered",
        episode_hours=24,
    )


def _rows(table: str) -> dict[str, list[str]]:
    rows = [line.strip("|").split("|") for line in table.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [cell.strip() for cell in cells[1:]] for cells in rows}


def test_learner_section_prints_ours_plain_ratio_and_where_the_time_goes(data_root: Path) -> None:
    config = replace(BenchConfig.quick(), data_root=str(data_root), sections=("learner",))
    text, figures = run_bench(config)

    section = text.split("### Learner throughput on the twin")[1]
    throughput, observation, profile = section.split("####")
    assert "| algorithm | ours frames/s | plain frames/s | ours / plain |" in throughput
    rows = _rows(throughput)
    assert {"PPO", "A2C", "SAC"} <= set(rows)
    for algorithm in ("PPO", "A2C", "SAC"):
        ours, plain, ratio = rows[algorithm][:3]
        assert float(ours.replace(",", "")) > 0 and float(plain.replace(",", "")) > 0
        assert ratio.startswith("**") and ratio.endswith("x**") and float(ratio.strip("*x")) > 0
    learner = figures["learner"]
    assert [row["algorithm"] for row in learner["rows"]] == ["PPO", "A2C", "SAC"]
    assert all(row["frames_ratio"] > 0 and row["updates_ratio"] > 0 for row in learner["rows"])

    assert "compact vs full observation" in observation
    assert learner["observation"]["compact_inputs"] < learner["observation"]["full_inputs"]
    assert learner["observation"]["ratio"] > 0 and learner["observation"]["plain_ratio"] > 0
    compact = _rows(observation)["compact (profile)"]
    plain_compact = learner["observation"]["plain_compact_frames_per_s"]
    assert float(compact[3].replace(",", "")) == pytest.approx(plain_compact, abs=0.51)  # the plain loop's column

    shares = _rows(profile)
    assert shares["total"] == ["100.0%", "100.0%", "100.0%"]
    for column, recorded in enumerate(learner["profiles"]):
        assert recorded["frames"] > 0
        assert sum(recorded["rows"].values()) == pytest.approx(recorded["seconds"], rel=1e-9)
        listed = [float(cells[column].rstrip("%")) for name, cells in shares.items() if name in PHASE_ROWS]
        assert sum(listed) == pytest.approx(100.0, abs=0.5)  # each share rounded to 0.1 %
        for phase in ("env: twin physics", "update: losses forward", "logging"):
            assert recorded["rows"][phase] > 0


def test_compiled_side_adds_its_rate_and_ratio_beside_the_eager_one() -> None:
    """``bench --compile on``: ours compiled sits in the same table, its frames/s and ratio to the same plain loop."""
    eager = LearnerRow("SAC", "16 envs", 500.0, 1000.0, 0.5, 125.0, 250.0, 0.5, rounds=2)
    compiled = replace(eager, compiled_frames_per_s=700.0, compiled_ratio=0.7)
    assert "ours compiled frames/s" not in learner_section(LearnerResult([eager], None, []), "tiny")
    table = learner_section(LearnerResult([compiled], None, []), "tiny")
    assert "| ours compiled frames/s | compiled / plain |" in table
    assert _rows(table)["SAC"][:6] == ["500", "1,000", "**0.50x**", "700", "**0.70x**", "0.90x: not met"]
    met_compiled = _rows(learner_section(LearnerResult([replace(compiled, compiled_ratio=0.95)], None, []), "tiny"))
    assert met_compiled["SAC"][5] == "0.90x: met compiled"
    met = _rows(learner_section(LearnerResult([replace(eager, frames_ratio=0.9)], None, []), "tiny"))
    assert met["SAC"][3] == "0.90x: met"  # no compiled side: the goal column follows the eager ratio
    spread = replace(compiled, frames_ratio_range=(0.45, 0.58), compiled_ratio_range=(0.7, 0.7))
    cells = _rows(learner_section(LearnerResult([spread], None, []), "tiny"))["SAC"]
    assert cells[2] == "**0.50x** (0.45-0.58)" and cells[4] == "**0.70x**"  # one value for all rounds: no brackets


def ppo_settings(**changes: object) -> OnPolicySettings:
    settings = OnPolicySettings(
        algorithm="PPO",
        frames_per_batch=64,  # 4 envs x 16 steps
        hidden_sizes=(16, 16),
        activation="tanh",
        lr=1e-3,
        gamma=0.99,
        gae_lambda=0.95,
        critic_coef=0.5,
        max_grad_norm=0.5,
        reward_normalization=True,
        reward_scale=1.0,
        policy_scale="parameter",
        initialisation="orthogonal",
        epochs=2,
        minibatch_size=24,  # 64 frames: minibatches of 24, 24, 16
    )
    return replace(settings, **changes)


def test_plain_ppo_counts_frames_and_updates_and_trains_every_weight(twin: IquitosTwin) -> None:
    torch.manual_seed(0)
    settings = ppo_settings()
    policy, critic = on_policy_networks(twin, settings)
    before = [parameter.detach().clone() for parameter in (*policy.parameters(), *critic.parameters())]

    marks = train_on_policy(twin, settings, rollouts=3, networks=(policy, critic))

    assert [frames for _, frames, _ in marks] == [64, 128, 192]
    assert [updates for _, _, updates in marks] == [6, 12, 18]  # 2 epochs x 3 minibatches a rollout
    assert all(later[0] > earlier[0] for earlier, later in zip(marks, marks[1:], strict=False))
    after = [parameter.detach() for parameter in (*policy.parameters(), *critic.parameters())]
    assert all(not torch.equal(old, new) for old, new in zip(before, after, strict=True))
    assert int(twin._state.t.min()) >= 0 and twin.resets_done > 1  # 24-hour episodes: partial resets happened


def test_plain_a2c_makes_one_update_a_rollout(twin: IquitosTwin) -> None:
    torch.manual_seed(0)
    marks = train_on_policy(twin, ppo_settings(algorithm="A2C", gae_lambda=1.0), rollouts=2)
    assert [(frames, updates) for _, frames, updates in marks] == [(64, 1), (128, 2)]


def test_plain_sac_starts_learning_after_its_random_frames_at_the_update_to_data_ratio(twin: IquitosTwin) -> None:
    torch.manual_seed(0)
    settings = SACSettings(
        frames_per_batch=16,
        hidden_sizes=(16, 16),
        activation="relu",
        batch_size=8,
        actor_lr=3e-4,
        critic_lr=1e-3,
        alpha_lr=1e-3,
        alpha_init=0.1,
        gamma=0.99,
        tau=0.005,
        updates_per_frame=0.25,
        init_random_frames=32,
        capacity=100,
        reward_scale=0.1,
    )
    marks = train_sac(twin, settings, rollouts=4)
    assert [(frames, updates) for _, frames, updates in marks] == [(16, 0), (32, 4), (48, 8), (64, 12)]


def test_plain_log_density_is_torchrls_tanh_normal() -> None:
    generator = torch.Generator().manual_seed(0)
    loc = torch.randn(32, 3, generator=generator)
    scale = torch.rand(32, 3, generator=generator) + 0.1
    pre_tanh = loc + scale * torch.randn(32, 3, generator=generator)
    expected = TanhNormal(loc, scale, low=-1.0, high=1.0).log_prob(torch.tanh(pre_tanh))
    assert torch.allclose(tanh_log_prob(loc, scale, pre_tanh), expected, rtol=1e-4, atol=1e-4)


def test_plain_gae_is_torchrls_through_truncations_and_terminations() -> None:
    generator = torch.Generator().manual_seed(0)
    steps, envs = 12, 5
    rewards, values, next_values = (torch.randn(steps, envs, generator=generator) for _ in range(3))
    terminated = torch.rand(steps, envs, generator=generator) < 0.1
    done = terminated | (torch.rand(steps, envs, generator=generator) < 0.1)  # truncations too
    settings = ppo_settings(gamma=0.97, gae_lambda=0.9)
    ours = gae(rewards, values, next_values, terminated, done, settings)

    def batch_time(tensor: torch.Tensor) -> torch.Tensor:  # TorchRL's layout: [envs, time, 1]
        return tensor.T[..., None]

    advantage, _ = generalized_advantage_estimate(
        0.97, 0.9, *(batch_time(tensor) for tensor in (values, next_values, rewards, done, terminated))
    )
    assert torch.allclose(ours, advantage[..., 0].T, atol=1e-5)


def test_plain_return_std_is_the_agents_reward_normalizer() -> None:
    generator = torch.Generator().manual_seed(0)
    normalizer, plain = RewardNormalizer(0.99), ReturnStd(envs=3, gamma=0.99)
    for _ in range(3):  # rollouts in a row: the returns in progress carry over
        rewards = torch.randn(3, 8, generator=generator)
        done = torch.rand(3, 8, generator=generator) < 0.2
        normalizer.update(rewards[..., None], done[..., None])
        assert plain.update(rewards.T, done.T) == pytest.approx(normalizer.std, rel=1e-12)
    assert math.isfinite(normalizer.std)


def test_a_fused_adam_run_says_so_under_its_table_and_passes_the_switch_to_ours() -> None:
    row = LearnerRow("SAC", "16 envs", 500.0, 1000.0, 0.5, 125.0, 250.0, 0.5, rounds=2)
    assert "fused" not in learner_section(LearnerResult([row], None, []), "tiny")
    assert "Ours steps Adam's fused kernel" in learner_section(LearnerResult([row], None, [], fused_adam=True), "tiny")
    case = LearnerConfig.quick(fused_adam=True).case("PPO")
    assert case.overrides["speed"] == {"fused_adam": True} and "epochs" in case.overrides  # the quick sizes kept
    assert "speed" not in LearnerConfig.quick().case("PPO").overrides


def test_the_learner_section_times_ours_compiled_by_default_but_not_in_the_quick_run() -> None:
    assert learner_compiles(BenchConfig())  # PPO's fast path beside the eager one
    assert not learner_compiles(replace(BenchConfig(), compile=False))
    assert not learner_compiles(BenchConfig.quick())  # the test's run stays short
    assert learner_compiles(replace(BenchConfig.quick(), compile=True))


def test_both_sides_keep_their_setup_out_of_collections_while_they_run_and_hand_it_back_after(
    data_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ours from the start of training, the plain loop for its whole loop (bench/timing.py
    ``setup_kept_out_of_collections``): a full collection of the setup's garbage lands in neither window."""
    import gc

    import lightning.pytorch as pl

    from benchmarks.bench import learner_runs

    case = replace(LearnerConfig.quick(data_root=str(data_root)).case("A2C"), timed_rollouts=1)
    frozen_at_batches: list[int] = []

    class FreezeCount(pl.Callback):
        def on_train_batch_end(self, *args: object) -> None:
            frozen_at_batches.append(gc.get_freeze_count())

    learner_runs.run_project(case, callbacks=[FreezeCount()])
    assert frozen_at_batches and min(frozen_at_batches) > 0
    assert gc.get_freeze_count() == 0

    frozen_in_plain: list[int] = []
    train = learner_runs.train_on_policy
    monkeypatch.setattr(
        learner_runs, "train_on_policy", lambda *args: frozen_in_plain.append(gc.get_freeze_count()) or train(*args)
    )
    learner_runs.run_plain(case, learner_runs.agent_hparams(case))
    assert frozen_in_plain[0] > 0
    assert gc.get_freeze_count() == 0
