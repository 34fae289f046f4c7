"""The twin resumes exactly anywhere: a PPO ``fit`` on the tiny site's twin, killed with SIGKILL right after a periodic
checkpoint taken mid-episode and resumed with ``--ckpt_path last``, ends with the uninterrupted run's weights.

The killed run is a real process (SIGKILL, no cleanup), started first; the uninterrupted run trains in this process
meanwhile (the tiny site is built once, before), then the killed one is resumed here too (``run_lightning_cli``, what
``fit --ckpt_path last`` runs: two start-ups of ~10 s fewer than as processes), all on one torch thread as the killed
process. Every checkpoint period (64 frames = 16 hours of each of the 4 staggered envs) ends inside 24-hour episodes,
and env 3's episodes are cut short at the year's end, so the envs' episodes do not even end together.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
import yaml
from agents_testkit import BatchRecorder, StopAtFrames, cpu_trainer, frame_checkpoint

from iquitos_lightning.agents import PPO, EnvConfig, RolloutConfig
from iquitos_lightning.cli import run_lightning_cli
from iquitos_lightning.envs.env_config import Backend, TrainingAids
from iquitos_lightning.envs.site_data import built_site

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "site" / "tiny.yaml"  # 7 days: 168 hours
CHECKPOINT_FRAMES, BUDGET = 64, 192  # a checkpoint every 16 hours of each env; 48 hours of each in all
RUN_TIMEOUT_S = 300


def _config(root: Path, data_root: Path, *, kill_after: int | None = None) -> Path:
    """The ``fit`` config of PPO on 4 staggered twin envs (24-hour episodes), writing under ``root``."""
    config = {
        "seed_everything": 0,
        "trainer": {
            "accelerator": "cpu",
            "devices": 1,
            "logger": {
                "class_path": "lightning.pytorch.loggers.CSVLogger",
                "init_args": {"save_dir": str(root), "name": "run"},
            },
            "enable_progress_bar": False,
            "enable_model_summary": False,
        },
        "checkpoint": {"every_n_frames": CHECKPOINT_FRAMES, "dirpath": str(root / "checkpoints")},
        "report": {"plots": False},
        "model": {
            "class_path": "iquitos_lightning.agents.PPO",
            "init_args": {
                "env": {
                    "name": "iquitos",
                    "site": str(TINY),
                    "backend": {"train": "twin", "num_envs": 4, "data_root": str(data_root)},
                    "episodes": {"seed": 0},
                    "training": {"start": "staggered", "episode_hours": 24},
                },
                "rollout": {
                    "frame_budget": BUDGET,
                    "frames_per_batch": 32,
                    "eval_every_frames": BUDGET,
                    "eval_episodes": 0,
                },
                "hidden_sizes": [16, 16],
                "epochs": 2,
                "minibatch_size": 32,
            },
        },
    }
    if kill_after is not None:
        config["trainer"]["callbacks"] = [
            {"class_path": "agents_testkit.SigkillAfterFrames", "init_args": {"frames": kill_after}}
        ]
    root.mkdir(parents=True, exist_ok=True)
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _fit(config: Path, *extra: str) -> subprocess.Popen:
    env = dict(os.environ)
    paths = [str(REPO), str(REPO / "tests" / "agents"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(paths).rstrip(os.pathsep)
    env["WANDB_MODE"] = "disabled"
    env.setdefault("OMP_NUM_THREADS", "1")
    command = [sys.executable, "-m", "iquitos_lightning", "fit", f"--config={config}", *extra]
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(child: subprocess.Popen) -> tuple[int, str]:
    _, stderr = child.communicate(timeout=RUN_TIMEOUT_S)
    return child.returncode, stderr


def _last(root: Path) -> dict:
    return torch.load(root / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)


@pytest.mark.slow
def test_a_twin_run_killed_mid_episode_resumes_to_the_uninterrupted_weights(tmp_path: Path) -> None:
    data_root = tmp_path / "data"
    built_site(TINY, data_root)  # once, before two runs would build it side by side
    torch.set_num_threads(1)  # as the killed process (OMP_NUM_THREADS=1); put back after the test (tests/conftest.py)
    killed_root = tmp_path / "killed"
    killed_config = _config(killed_root, data_root, kill_after=CHECKPOINT_FRAMES)
    killed = _fit(killed_config)
    assert run_lightning_cli(["fit", f"--config={_config(tmp_path / 'uninterrupted', data_root)}"]) == 0
    code, stderr = _finish(killed)
    assert code == -signal.SIGKILL, stderr
    state = _last(killed_root)["rl_state"]
    assert state["frames_done"] == CHECKPOINT_FRAMES and not state["at_episode_boundary"]

    assert run_lightning_cli(["fit", f"--config={killed_config}", "--ckpt_path=last", "--trainer.callbacks=[]"]) == 0

    resumed, reference = _last(killed_root), _last(tmp_path / "uninterrupted")
    assert resumed["rl_state"]["frames_done"] == reference["rl_state"]["frames_done"] == BUDGET
    assert resumed["state_dict"].keys() == reference["state_dict"].keys()
    differ = [
        name for name, value in reference["state_dict"].items() if not torch.equal(resumed["state_dict"][name], value)
    ]
    assert not differ, f"the resumed run's weights differ from the uninterrupted run's: {differ}"
    for counter in ("updates_done", "episodes_done", "last_episode_return"):  # it went through the same episodes
        assert resumed["rl_state"][counter] == reference["rl_state"][counter], counter


def _twin_ppo(data_root: Path, num_envs: int = 4) -> PPO:
    """The PPO of the config above, built in this process."""
    return PPO(
        env=EnvConfig(
            site=str(TINY),
            backend=Backend(train="twin", num_envs=num_envs, data_root=str(data_root)),
            training=TrainingAids(start="staggered", episode_hours=24),
        ),
        rollout=RolloutConfig(frame_budget=BUDGET, frames_per_batch=32, eval_every_frames=BUDGET, eval_episodes=0),
        hidden_sizes=(16, 16),
        epochs=2,
        minibatch_size=32,
    )


def test_a_twin_checkpoint_holds_the_episodes_in_progress_and_another_batch_starts_fresh_ones(tmp_path: Path) -> None:
    data_root, root = tmp_path / "data", tmp_path / "run"
    pl.seed_everything(0)
    cpu_trainer(root, callbacks=[frame_checkpoint(root, CHECKPOINT_FRAMES), StopAtFrames(CHECKPOINT_FRAMES)]).fit(
        _twin_ppo(data_root)
    )
    checkpoint = str((root / "checkpoints" / "last.ckpt").resolve())  # both resumes below start from it
    state = torch.load(checkpoint, weights_only=True)["rl_state"]
    saved = state["env_state"]
    assert saved["env"]["tensors"]["t"].tolist() == [16, 58, 100, 142]  # 16 hours into each env's first episode
    assert saved["collector"]["carrier"]["step_count"].flatten().tolist() == [16] * 4
    assert state["agent"]["reward_normalizer"]["returns"].shape == (4,)

    same, recorder = _twin_ppo(data_root), BatchRecorder()
    cpu_trainer(callbacks=[recorder]).fit(same, ckpt_path=checkpoint)
    assert recorder.first_batch["step_count"][:, 0, 0].tolist() == [16] * 4  # the episodes went on

    other, recorder = _twin_ppo(data_root, num_envs=2), BatchRecorder()
    with pytest.warns(UserWarning, match="fresh episodes, not the saved ones: the saved twin state's t"):
        cpu_trainer(callbacks=[recorder]).fit(other, ckpt_path=checkpoint)
    assert recorder.first_batch["step_count"][:, 0, 0].tolist() == [0, 0]
    assert other.frames_done == BUDGET
