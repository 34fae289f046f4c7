"""SAC trains on the batched twin: an [envs, time] rollout goes into the replay buffer as flat transitions."""

from __future__ import annotations

from pathlib import Path

from agents_testkit import cpu_trainer

from iquitos_lightning.agents import SAC, EnvConfig, ReplayBufferConfig, RolloutConfig

TINY = str(Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml")


def test_sac_on_a_batched_twin_stores_flat_transitions(tmp_path):
    agent = SAC(
        env=EnvConfig(site=TINY, data_root=str(tmp_path / "data"), backend="twin", num_envs=4),
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
