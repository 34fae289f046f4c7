"""The envs an agent trains and is evaluated on: envs/factory.py's, with what the controllers of control/ add.

Why here: the env is the control problem and runs no controller, but an agent's run may need two things only a
controller gives, and the agents sit above both layers: the reference runs' tables a training twin reads
(``env.training.start_peak``, ``env.training.reward_baseline``: control/training_references.py) and the residual wrapper
that maps the agent's action around a controller's (``env.residual``: control/residual.py). Every env an agent
steps, in the training process, in a collection worker, for evaluation, selection or a test year, is built here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from torchrl.envs import EnvBase

from iquitos_lightning.control.residual import residual_around
from iquitos_lightning.control.training_references import reference_tables
from iquitos_lightning.envs.factory import EnvConfig, make_env, make_year_env, training_site, worker_env_makers
from iquitos_lightning.envs.reference_tables import NO_REFERENCES


def make_agent_env(config: EnvConfig, *, evaluation: bool = False, selection: bool = False) -> EnvBase:
    """:func:`~iquitos_lightning.envs.factory.make_env`'s env of ``config`` with the training twin's reference
    tables and the run's residual wrapper (module docstring). A training twin's site and years are read once, here,
    and handed to both the reference runs and the twin."""
    site = training_site(config) if config.on_twin and not evaluation else None
    references = NO_REFERENCES if site is None else reference_tables(config, site)
    env = make_env(config, evaluation=evaluation, selection=selection, references=references, site=site)
    return residual_around(env, config)


def make_agent_year_env(config: EnvConfig, seed: int) -> EnvBase:
    """The evaluation env of the site profile's year ``seed`` (a test year) with the run's residual wrapper."""
    return residual_around(make_year_env(config, seed), config)


def agent_worker_env_makers(config: EnvConfig) -> list[Callable[[], EnvBase]]:
    """One picklable env maker per collection worker (envs/factory.py ``worker_env_makers``), each env with the
    run's residual wrapper."""
    return [partial(_worker_env, maker, config) for maker in worker_env_makers(config)]


def _worker_env(maker: Callable[[], EnvBase], config: EnvConfig) -> EnvBase:
    return residual_around(maker(), config)
