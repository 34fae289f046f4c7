"""The compiled twin on the device code path (``env.backend.device: training``) with the card's own env options runs
the horizon as the eager CPU twin does.

Why apart from tests/envs/test_twin_compiled.py: that file steps bare twins of each layout and objective; this one
builds the training twin the way a card run does, from its env config (configs/base/card.yaml's options:
``self_consumption_window``, ``tariff``, past-days forecasts, staggered starts from the peak shaver's start peaks,
with ``backend.compile`` and ``backend.device: training``) through ``make_env``, moves it to the training device as
the agent does (a no-op on a CPU run), then takes the device code path (``sync_free``: no host sync in a step; the
CPU takes it only when told, a GPU always) and is stepped by the collector an agent uses. Its own file, so
pytest-xdist runs its compile beside the others'.

On the CPU every key of every step must be bit-equal to the eager CPU twin's; on CUDA (``pytest -m gpu``) within the
float32 round-off tests/envs/test_device_twin.py allows (kernels may fuse or order float operations differently).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch._dynamo.utils import counters

from iquitos_lightning.control.training_references import reference_tables
from iquitos_lightning.envs.env_config import CPU, TRAINING_DEVICE, EnvConfig
from iquitos_lightning.envs.factory import make_env
from iquitos_lightning.envs.training_twin import TrainingTwin
from iquitos_lightning.profile.bases import profile_yaml
from tests.envs.twin_testkit import CUDA, REPOSITORY_DATA, TINY, TINY_HOURS, table_rollout

CARD = "configs/base/card.yaml"


@pytest.fixture(autouse=True)
def empty_compile_cache() -> Iterator[None]:
    """Dynamo keeps a bounded number of graphs per function, then runs it eagerly: each test compiles afresh."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def card_config(**backend: Any) -> EnvConfig:
    """The card's env options on the tiny site: its own year (the tiny site has no training years built), 4 envs of
    40-h episodes (staggered over the 168-h horizon: truncations, partial resets and the year's end are crossed)."""
    env = dict(profile_yaml(CARD)["model"]["init_args"]["env"])
    env |= {"site": TINY, "validation_site_seed": None}
    env["training"] = {**env["training"], "train_site_seeds": None, "episode_hours": 40}
    env["backend"] = {**env["backend"], "num_envs": 4, "data_root": str(REPOSITORY_DATA), **backend}
    return EnvConfig(**env)


def training_twin(config: EnvConfig) -> TrainingTwin:
    twin = make_env(config, references=reference_tables(config))
    assert isinstance(twin, TrainingTwin)
    return twin


@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_the_compiled_twin_on_the_device_path_runs_the_horizon_as_the_eager_cpu_twin(device: str) -> None:
    config = card_config(compile=True, device=TRAINING_DEVICE)
    assert (config.layout, config.objective) == ("self_consumption_window", "tariff")  # the card's problem
    reference = table_rollout(training_twin(dataclasses.replace(config, backend=_eager_cpu(config))), TINY_HOURS)

    twin = training_twin(config)
    assert "_simulate" in vars(twin)  # backend.compile compiled its step
    moved = twin.to(torch.device(device))  # what the agent does with backend.device: training (agents/base.py)
    moved.sync_free = True  # the device code path: the CPU takes it only when told; CUDA always does
    graphs = counters["stats"]["unique_graphs"]
    rollout = table_rollout(moved, TINY_HOURS)
    assert counters["stats"]["unique_graphs"] > graphs  # it ran a captured graph, not the eager fallback
    assert rollout.device.type == device
    moved.check_rollout(rollout)
    assert rollout["next", "truncated"].any() and rollout["next", "terminated"].any()  # resets were crossed
    for key, value in reference.items(include_nested=True, leaves_only=True):
        other = rollout.get(key).cpu()
        if device == "cpu" or not value.is_floating_point():
            assert torch.equal(other, value), key
        else:
            torch.testing.assert_close(other, value, rtol=1e-5, atol=1e-5, msg=lambda text, key=key: f"{key}: {text}")


def _eager_cpu(config: EnvConfig) -> Any:
    return dataclasses.replace(config.backend, compile=False, device=CPU)
