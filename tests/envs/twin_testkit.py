"""What the training-twin tests share: the tiny site, a batch of short staggered tariff episodes on it, and a rollout
of fixed actions through the collector an agent uses."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torchrl.collectors import Collector

from iquitos_lightning.envs.training_twin import STEP_COUNT, TrainingTwin

TINY = str(Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml")
TINY_HOURS = 168  # the tiny site's horizon
# The device tests' data: the repository's data/ (the tiny site built there once, as a user's command builds it): a GPU
# machine gets it built, not the means to build it (no pvlib there)
REPOSITORY_DATA = Path("data")
# a device parameter that runs only where CUDA is (marked gpu)
CUDA = pytest.param(
    "cuda",
    marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")],
)
# 3 envs of 10-h episodes from staggered starts: a few steps cross episode ends and partial resets
OPTIONS = {"num_envs": 3, "start": "staggered", "episode_hours": 10, "layout": "fleet", "objective": "tariff"}


class ActionTable(torch.nn.Module):
    """Action k of a fixed random table at step count k: the same actions on any device, whatever it observes (so a
    last-bit difference in an observation cannot change the trajectory)."""

    def __init__(self, actions: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("actions", actions)

    def forward(self, step_count: torch.Tensor) -> torch.Tensor:
        return self.actions[step_count[..., 0] % len(self.actions)]


def table_rollout(twin: TrainingTwin, steps: int) -> TensorDictBase:
    """``steps`` steps of every env of ``twin`` under TorchRL's ``Collector`` with :class:`ActionTable`'s actions (one
    random row a step count, the same for every env), stored on the twin's device."""
    generator = torch.Generator().manual_seed(0)
    actions = torch.rand(TINY_HOURS, twin.num_envs, twin.action_size, generator=generator) * 2 - 1
    table = ActionTable(actions[:, 0]).to(twin.device)  # [steps, actions]: the same row for every env
    policy = TensorDictModule(table, in_keys=[STEP_COUNT], out_keys=["action"])
    collector = Collector(
        twin, policy, frames_per_batch=twin.num_envs * steps, total_frames=-1, env_device=twin.device,
        policy_device=twin.device, storing_device=twin.device, auto_register_policy_transforms=False,
    )  # fmt: skip
    rollout = next(iter(collector))
    collector.shutdown()
    return rollout.exclude("collector")
