"""The learning layer: SAC, PPO and A2C as LightningModules on TorchRL, on a shared base (:mod:`.base`).

The names below are imported on first use (PEP 562), not with the package. Why: a collection worker process
unpickles its env maker from :mod:`.site_envs`, which imports this package first; eager imports of the agents pulled
Lightning into every worker, ~4 s of each worker's start on the 2-core machine for a module it never uses.
``from iquitos_lightning.agents import PPO`` and a config's ``class_path: iquitos_lightning.agents.PPO`` work as
before.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from iquitos_lightning.agents.a2c import A2C
    from iquitos_lightning.agents.base import RLAgent
    from iquitos_lightning.agents.config import RolloutConfig
    from iquitos_lightning.agents.ppo import PPO
    from iquitos_lightning.agents.replay import ReplayBufferConfig
    from iquitos_lightning.agents.sac import SAC
    from iquitos_lightning.envs.env_config import EnvConfig
    from iquitos_lightning.envs.factory import make_env

_HOMES = {
    "A2C": "iquitos_lightning.agents.a2c",
    "PPO": "iquitos_lightning.agents.ppo",
    "SAC": "iquitos_lightning.agents.sac",
    "RLAgent": "iquitos_lightning.agents.base",
    "RolloutConfig": "iquitos_lightning.agents.config",
    "ReplayBufferConfig": "iquitos_lightning.agents.replay",
    "EnvConfig": "iquitos_lightning.envs.env_config",
    "make_env": "iquitos_lightning.envs.factory",
}

__all__ = ["A2C", "PPO", "SAC", "EnvConfig", "ReplayBufferConfig", "RLAgent", "RolloutConfig", "make_env"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
