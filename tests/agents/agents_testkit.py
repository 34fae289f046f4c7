"""Small real runs shared by the agent tests: Pendulum with short episodes, tiny networks, CPU Trainers."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from iquitos_lightning.agents import SAC, EnvConfig, ReplayBufferConfig, RolloutConfig
from iquitos_lightning.envs.env_config import Backend, Episodes
from iquitos_lightning.training.callbacks.evaluation import PolicyEvaluation
from iquitos_lightning.training.callbacks.frame_checkpoint import FrameCheckpoint


def small_sac(frame_budget: int, *, episode_steps: int = 50, frames_per_batch: int = 50, **overrides: Any) -> SAC:
    """SAC on Pendulum with ``episode_steps``-long episodes, sized to run in seconds."""
    settings: dict[str, Any] = {
        "env": EnvConfig(name="Pendulum-v1", episodes=Episodes(seed=3, max_steps=episode_steps)),
        "rollout": RolloutConfig(
            frame_budget=frame_budget,
            frames_per_batch=frames_per_batch,
            eval_every_frames=frames_per_batch * 2,
            eval_episodes=1,
        ),
        "buffer": ReplayBufferConfig(capacity=10_000),
        "hidden_sizes": (32, 32),
        "batch_size": 32,
        "init_random_frames": frames_per_batch,
    }
    settings.update(overrides)
    return SAC(**settings)


class BatchRecorder(pl.Callback):
    """Keeps what each training step returned, keyed by the frames done after it."""

    def __init__(self) -> None:
        self.outputs: dict[int, dict[str, float]] = {}
        self.first_batch = None

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.first_batch is None:
            self.first_batch = batch
        self.outputs[pl_module.frames_done] = dict(outputs)


class StopAtFrames(pl.Callback):
    """Interrupts a run once it has collected ``frames`` frames (as a crash or Ctrl-C would)."""

    def __init__(self, frames: int) -> None:
        self.frames = frames

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if pl_module.frames_done >= self.frames:
            trainer.should_stop = True


class SigkillAfterFrames(pl.Callback):
    """Kills its own process with SIGKILL (nothing saved, nothing cleaned up) at the first training batch after
    ``frames`` frames: right after the periodic checkpoint of those frames is written, while the next rollout is
    in. For ``fit`` runs in a child process (``--trainer.callbacks``, with ``tests/agents`` on ``PYTHONPATH``)."""

    def __init__(self, frames: int) -> None:
        self.frames = frames

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if pl_module.frames_done >= self.frames:
            os.kill(os.getpid(), signal.SIGKILL)


def cpu_trainer(root: Path | None = None, callbacks: list[pl.Callback] | None = None, **kwargs: Any) -> pl.Trainer:
    """A CPU Trainer as the CLI builds one for an agent: with :class:`PolicyEvaluation` (what plays and logs the
    evaluations) before ``callbacks``."""
    settings: dict[str, Any] = {
        "accelerator": "cpu",
        "devices": 1,
        "max_epochs": -1,
        "num_sanity_val_steps": 0,
        "logger": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "enable_checkpointing": root is not None,
        "callbacks": [PolicyEvaluation(), *(callbacks or [])],
        "default_root_dir": str(root) if root else None,
    }
    settings.update(kwargs)
    return pl.Trainer(**settings)


def frame_checkpoint(root: Path, every_n_frames: int) -> FrameCheckpoint:
    return FrameCheckpoint(every_n_frames=every_n_frames, dirpath=str(root / "checkpoints"), save_top_k=-1)


# The agents' on-policy parameterisations a lean loss must match the library's forward on (tanh-squashed with one
# learned log-std, CleanRL's; a plain Gaussian with a state-dependent scale and torch's initialisation).
POLICY_PARAMETERISATIONS = {
    "tanh_parameter_scale": {"policy_scale": "parameter", "distribution": "tanh_normal"},
    "normal_state_scale": {"policy_scale": "state", "distribution": "normal", "initialisation": "default"},
}


TINY_TWIN = EnvConfig(
    name="iquitos", site="configs/site/tiny.yaml", backend=Backend(train="twin", num_envs=4), episodes=Episodes(seed=0)
)


def moved_after_collecting(agent_class: Any, moved: Any, **agent_options: Any) -> tuple[Any, Any]:
    """An on-policy agent on the tiny site's twin (4 envs, 16x16 networks), a 64-frame rollout it collected with its
    advantages as the update reads it, and then ``moved(agent)``'s parameters moved by 0.2 x a standard normal: a
    lean loss and the library's must both score the rollout with the moved weights."""
    torch.manual_seed(0)
    rollout_config = RolloutConfig(frames_per_batch=64, eval_every_frames=64)
    agent = agent_class(env=TINY_TWIN, rollout=rollout_config, hidden_sizes=(16, 16), **agent_options)
    with torch.no_grad():
        rollout = agent.train_env.rollout(16, agent.actor, break_when_any_done=False)
    data = agent.with_advantages(rollout).select(*agent.update_keys()).reshape(-1)
    with torch.no_grad():
        for parameter in moved(agent).parameters():
            parameter.add_(0.2 * torch.randn_like(parameter))
    return agent, data


def loss_terms_and_gradients(
    agent: Any, forward: Any, data: Any, terms: tuple[str, ...]
) -> tuple[dict[str, torch.Tensor], list[torch.Tensor]]:
    """``forward(agent.loss_module, data)``'s ``terms`` and the gradients of its two loss terms' sum (a lean loss's
    forward and the library's are compared on these)."""
    agent.loss_module.zero_grad()
    out = forward(agent.loss_module, data.clone())
    (out["loss_objective"] + out["loss_critic"]).backward()
    gradients = [parameter.grad.clone() for parameter in agent.loss_module.parameters() if parameter.grad is not None]
    return {key: out[key].detach() for key in terms}, gradients
