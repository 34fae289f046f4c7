"""The twin's row in the env-speed table: steps/s of the batched twin beside CityLearn's.

The twin's own, longer measurement (B = 1 .. 1024, compiled or not) is ``benchmarks/twin_speed.py``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torchrl.envs.utils import step_mdp


@dataclass
class TwinSpeed:
    status: str  # "measured" or the error
    steps_per_s: float | None = None  # env steps (all envs together) per second
    num_envs: int = 0


def measure_twin(site: str, *, data_root: Path = Path("data"), num_envs: int = 64, steps: int = 50) -> TwinSpeed:
    """Env steps/s of the batched twin (:mod:`iquitos_lightning.envs.twin`) under random actions."""
    try:
        # lazy: the twin (torch, the site builder) loads only when this section runs
        from iquitos_lightning.envs.twin import make_twin

        env = make_twin(site, data_root=data_root, num_envs=num_envs)
        tensordict = env.reset()
        generator = torch.Generator().manual_seed(0)
        actions = [torch.rand(env.action_spec.shape, generator=generator) * 2 - 1 for _ in range(steps)]
        start = time.perf_counter()
        for action in actions:
            tensordict["action"] = action
            tensordict = step_mdp(env.step(tensordict))
        seconds = time.perf_counter() - start
    except Exception as error:  # a bench row reports, it never aborts the bench
        return TwinSpeed(status=f"error: {type(error).__name__}: {error}")
    return TwinSpeed(status="measured", steps_per_s=steps * num_envs / seconds, num_envs=num_envs)
