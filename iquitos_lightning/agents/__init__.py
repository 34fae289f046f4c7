"""The learning layer: SAC, PPO and A2C as LightningModules on TorchRL, on a shared base (:mod:`.base`)."""

from iquitos_lightning.agents.a2c import A2C
from iquitos_lightning.agents.base import RLAgent
from iquitos_lightning.agents.config import RolloutConfig
from iquitos_lightning.agents.ppo import PPO
from iquitos_lightning.agents.replay import ReplayBufferConfig
from iquitos_lightning.agents.sac import SAC
from iquitos_lightning.envs.env_config import EnvConfig
from iquitos_lightning.envs.factory import make_env

__all__ = ["A2C", "PPO", "SAC", "EnvConfig", "ReplayBufferConfig", "RLAgent", "RolloutConfig", "make_env"]
