"""On-line RL agents (SAC, PPO, A2C) as LightningModules on TorchRL, sharing :mod:`.base`."""

from iquitos_lightning.agents.a2c import A2C
from iquitos_lightning.agents.base import RLAgent, RolloutConfig
from iquitos_lightning.agents.ppo import PPO
from iquitos_lightning.agents.replay import ReplayBufferConfig
from iquitos_lightning.agents.sac import SAC
from iquitos_lightning.envs.factory import EnvConfig, make_env

__all__ = ["A2C", "PPO", "SAC", "EnvConfig", "ReplayBufferConfig", "RLAgent", "RolloutConfig", "make_env"]
