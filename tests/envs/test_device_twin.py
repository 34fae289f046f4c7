"""The twin's device code path (``sync_free``: no host sync in a step, tables and state moved by ``to``) runs the site's
whole horizon as the CPU twin does, on every kept layout and both objectives, through the collector an agent uses.

On the CPU the path is forced (``sync_free = True``) and must give the very same rollouts, bit for bit; on CUDA
(``pytest -m gpu``) the moved twin must equal the CPU twin within float32 round-off (kernels may fuse or order float
operations differently), the same actions going in (a fixed table indexed by the step count, not a function of the
observation, so a last-bit difference cannot change the trajectory).
"""

from __future__ import annotations

import pytest
import torch

from iquitos_lightning.envs.actions import LAYOUTS
from iquitos_lightning.envs.env_config import EnvConfig
from iquitos_lightning.envs.finite import NonFiniteEnvValue
from iquitos_lightning.envs.training_twin import make_torchrl_twin
from iquitos_lightning.envs.twin_device import twin_device_bytes
from iquitos_lightning.errors import ConfigError
from tests.envs.twin_testkit import CUDA, REPOSITORY_DATA, TINY, TINY_HOURS, table_rollout

# 4 envs of 40-h episodes from staggered starts (0, 42, 84, 126): over 168 steps each env covers the horizon, through
# truncations, partial resets and the year's end
OPTIONS = {"num_envs": 4, "start": "staggered", "episode_hours": 40}


@pytest.mark.parametrize("objective", ["tariff", "thesis"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_the_device_code_path_runs_the_horizon_as_the_cpu_twin(device: str, layout: str, objective: str) -> None:
    options = {**OPTIONS, "layout": layout, "objective": objective}
    reference = table_rollout(make_torchrl_twin(TINY, data_root=REPOSITORY_DATA, **options), TINY_HOURS)
    moved = make_torchrl_twin(TINY, data_root=REPOSITORY_DATA, **options).to(device)
    moved.sync_free = True  # the CPU takes it only when told; CUDA always does
    assert moved.sync_free and not moved.checks_every_step
    held = [
        value
        for holder in (moved, moved._state, moved.stacked)
        for value in vars(holder).values()
        if isinstance(value, torch.Tensor)
    ]
    assert held and all(value.device.type == device for value in held)

    rollout = table_rollout(moved, TINY_HOURS)
    assert rollout.device.type == device  # stored where the twin steps: GAE and the updates read it there
    moved.check_rollout(rollout)  # the per-rollout finite check replacing the per-step one
    assert rollout["next", "truncated"].any() and rollout["next", "terminated"].any()  # resets were crossed
    for key, value in reference.items(include_nested=True, leaves_only=True):
        other = rollout.get(key).cpu()
        if device == "cpu" or not value.is_floating_point():
            assert torch.equal(other, value), key
        else:
            torch.testing.assert_close(other, value, rtol=1e-5, atol=1e-5, msg=lambda text, key=key: f"{key}: {text}")


def test_a_rollout_with_a_non_finite_value_is_refused_naming_it() -> None:
    twin = make_torchrl_twin(TINY, data_root=REPOSITORY_DATA, **OPTIONS)
    twin.sync_free = True
    rollout = table_rollout(twin, 8)
    rollout["next", "reward"][2, 5] = float("nan")
    with pytest.raises(NonFiniteEnvValue, match="non-finite reward = nan in env 2 of the batch at step 6"):
        twin.check_rollout(rollout)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_estimate_the_auto_profile_makes_without_a_site_covers_what_the_twin_holds(layout: str) -> None:
    twin = make_torchrl_twin(TINY, data_root=REPOSITORY_DATA, **OPTIONS, layout=layout, objective="tariff")
    width = twin.observation_spec["observation"].shape[-1]
    tables, per_env = twin_device_bytes(rows=twin.hours, sockets=twin.sockets, observation_width=width)
    estimate, held = tables + twin.num_envs * per_env, twin.device_bytes()
    assert held <= estimate <= 3 * held, (held, estimate)


@pytest.mark.parametrize(
    ("backend", "says"),
    [
        ({"device": "training"}, "backend.device: training moves the twin to the training device: set backend.train"),
        ({"train": "twin", "device": "gpu"}, r"backend.device must be one of \('cpu', 'training'\), got 'gpu'"),
        ({"train": "twin", "device": "training"}, "residual with backend.device: training is not tested on a GPU"),
    ],
)
def test_a_device_for_anything_but_the_twin_or_an_unknown_one_is_one_line(backend: dict, says: str) -> None:
    residual = "rule" if "residual" in says else None
    with pytest.raises(ConfigError, match=f"^model.init_args.env: {says}"):
        EnvConfig(layout="fleet", residual=residual, backend=backend)
