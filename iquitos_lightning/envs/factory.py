"""Build the environment an agent trains on, from config: the Iquitos site or any Gymnasium id.

Why a factory of our own: agents need the same TorchRL env shape whatever the task (float32
observations and reward; a ``step_count``; a running ``episode_reward`` for returns) and every reset
seeded from an episode counter (:class:`EpisodeSeeding`). Envs with flat ``Box`` spaces (the Iquitos
site, Pendulum) get all of it from one layer, :class:`~iquitos_lightning.envs.gym_env.FlatGymEnv`;
any other Gymnasium env gets TorchRL's ``GymWrapper`` + ``StepCounter`` + ``RewardSum`` (with
``DoubleToFloat`` only where it has float64). Seeding each episode by its index is what makes resume exact from an
episode boundary: a checkpoint stores one integer and the resumed run replays the same initial states, for
Pendulum as for CityLearn, without pickling any simulator. The twin saves its whole state instead
(:class:`ResumesAnywhere`), so a run on it resumes exactly anywhere, mid-episode included.
The Iquitos env is imported lazily so Gymnasium-only runs never import CityLearn. Every Gymnasium
env is wrapped in :class:`~iquitos_lightning.envs.finite.FiniteValues` (a NaN observation or reward
stops the run naming the key) and an unknown id is refused as a config error naming ``model.env.name``.

Backends of the Iquitos site (``EnvConfig.backend.train``, envs/env_config.py): ``"citylearn"`` (the reference
simulator) or ``"twin"`` (:class:`~iquitos_lightning.envs.twin.IquitosTwin`, the same physics as B batched
envs in torch, proven equal by ``tests/envs/test_twin.py``). ``make_env(config, evaluation=True)``
builds CityLearn unless ``backend.evaluate`` is ``"twin"``: one twin env over the full year from hour 0
(:class:`~iquitos_lightning.envs.twin_gym.TwinGymEnv`), bit-equal and about 10x faster, for
evaluation at intervals during training.

Parallel workers are one switch, ``backend.num_workers``: above 1 rollouts are collected by that many worker
processes (:mod:`iquitos_lightning.agents.collection`), each one env built by
:func:`worker_env_makers` with its own episode counter (worker ``w`` seeds episode ``k`` with
``episodes.seed + w * WORKER_SEED_STRIDE + k``); rollouts then have a leading worker dimension. The training
process keeps one env of its own for the specs the networks are built from. Evaluation always runs
one env in the training process. Resume is exact only when collection runs in the training process:
worker counters are not checkpointed, so a resumed run with workers continues from the checkpoint's
weights, buffer and RNG but restarts each worker's episodes from its first seed.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
import torch
from torchrl.data import Unbounded
from torchrl.envs import DoubleToFloat, EnvBase, GymWrapper, RewardSum, StepCounter, TransformedEnv

from iquitos_lightning.envs.actions import action_count
from iquitos_lightning.envs.env_config import IQUITOS, TWIN, EnvConfig
from iquitos_lightning.envs.finite import FiniteValues
from iquitos_lightning.envs.gym_env import FlatGymEnv, SpecsOnly, is_flat_box_env
from iquitos_lightning.envs.hindsight import HINDSIGHT, hindsight_names
from iquitos_lightning.envs.reference_tables import NO_REFERENCES, ReferenceTables, missing_references
from iquitos_lightning.envs.site_data import LoadedSite, load_site, site_config_of, site_year, site_years
from iquitos_lightning.envs.site_tables import observation_names, resolve_observation
from iquitos_lightning.errors import ConfigError
from iquitos_lightning.site.config import SiteConfig

WORKER_IGNORED_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # the group's stop signals: for the training process
WORKER_SEED_STRIDE = 1_000_000  # seeds of different workers never meet (an episode count below a million)


@runtime_checkable
class EpisodeCounter(Protocol):
    """What checkpoints read and write on a training env: how many resets it has done."""

    resets_done: int


class EpisodeSeeding(gym.Wrapper):
    """Resets episode ``k`` with seed ``base_seed + k``: the episode counter is the env's whole RNG state."""

    def __init__(self, env: gym.Env, base_seed: int) -> None:
        super().__init__(env)
        self.base_seed = base_seed
        self.resets_done = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        episode_seed = self.base_seed + self.resets_done if seed is None else seed
        self.resets_done += 1
        return self.env.reset(seed=episode_seed, options=options)


def _make_gym_env(config: EnvConfig, *, evaluation: bool = False, site: str | SiteConfig | None = None) -> gym.Env:
    site = config.site if site is None else site
    if config.name == IQUITOS and evaluation and config.backend.evaluate == TWIN:
        # lazy: the twin reads the built site (pvlib behind the site builder); Gymnasium-only runs never need it
        from iquitos_lightning.envs.twin import make_twin
        from iquitos_lightning.envs.twin_gym import TwinGymEnv  # lazy: as the twin above

        options = site_env_options(config)
        twin = make_twin(site, data_root=Path(config.backend.data_root), record=True, **options)
        return TwinGymEnv(twin)
    if config.name == IQUITOS:
        try:
            # lazy: CityLearn (and pvlib behind the site builder) load in seconds; Gymnasium-only runs never need them
            from iquitos_lightning.envs.citylearn import make_iquitos_env
        except ModuleNotFoundError as error:
            if (error.name or "").split(".")[0] != "citylearn":
                raise
            raise ConfigError(
                "the Iquitos site needs CityLearn, which is not installed: pip install --no-deps -r "
                "requirements-nodeps.lock (citylearn 3.0.2; its declared dependencies would break torch)"
            ) from None
        options = site_env_options(config)
        return make_iquitos_env(site, data_root=Path(config.backend.data_root), **options)
    kwargs = {} if config.episodes.max_steps is None else {"max_episode_steps": config.episodes.max_steps}
    try:
        return gym.make(config.name, **kwargs)
    except gym.error.Error as error:
        raise ConfigError(
            f"model.env.name: unknown environment {config.name!r} ({error}); use {IQUITOS!r} (the site of "
            "model.env.site) or a registered Gymnasium id such as 'Pendulum-v1'"
        ) from None


def make_env(
    config: EnvConfig,
    *,
    evaluation: bool = False,
    selection: bool = False,
    references: ReferenceTables = NO_REFERENCES,
    site: LoadedSite | None = None,
) -> EnvBase:
    """The TorchRL env of ``config`` on the CPU; ``evaluation`` picks the evaluation seed stream, ``selection``
    (with ``evaluation``) the evaluation env of the selection year (``validation_site_seed``).

    ``site``: the training twin's site and years as the caller already loaded them (:func:`training_site`), so one
    env build reads them once; loaded here when not given.

    ``references``: the reference runs' tables a training twin's ``training.start_peak`` and
    ``training.reward_baseline`` need (envs/reference_tables.py), made above the env by
    control/training_references.py; a twin that needs one it is not given is refused. The residual wrapper
    (``residual``) is put around the env above it too (agents/site_envs.py).

    With ``backend.train: twin`` the training env is the batched twin (``backend.num_envs`` envs); an
    evaluation env is CityLearn unless ``backend.evaluate`` is ``"twin"``. With ``backend.num_workers`` > 1 this is the
    training process's own env (specs, and the seed stream of worker 0); the workers build theirs from
    :func:`worker_env_makers`.
    """
    if config.on_twin and not evaluation:
        # lazy: the twin reads the built site (pvlib behind the site builder); Gymnasium-only runs never need it
        from iquitos_lightning.envs.training_twin import TrainingTwin

        missing = missing_references(
            references,
            start_peak=config.training.start_peak,
            start=config.training.start,
            objective=config.objective,
            reward_baseline=config.training.reward_baseline,
        )
        if missing:
            raise ValueError(f"the training twin needs reference tables it was not given: {'; '.join(missing)}")
        aids = {"references": references, "critic_forecasts": config.training.critic_forecasts}
        site = site or training_site(config)
        return TrainingTwin(site.schema_path, site.series, years=site.years, **twin_settings(config), **aids)
    if selection:
        if not evaluation or config.validation_site_seed is None:
            raise ValueError("a selection env is an evaluation env of a run with a validation_site_seed")
        year = site_year(config.site, config.validation_site_seed)
        return _make_single_env(config, config.episodes.eval_seed, evaluation=True, site=year)
    episodes = config.episodes
    return _make_single_env(config, episodes.eval_seed if evaluation else episodes.seed, evaluation=evaluation)


def make_year_env(config: EnvConfig, seed: int) -> EnvBase:
    """The evaluation env of the site profile's year ``seed`` (a test year, envs/site_data.py ``site_year``): the
    run's layout, objective, forecasts and evaluation simulator, on a year it neither trained on nor was chosen on."""
    if config.name != IQUITOS:
        raise ValueError("a site year needs the Iquitos site (model.env.name: iquitos)")
    return _make_single_env(config, config.episodes.eval_seed, evaluation=True, site=site_year(config.site, seed))


def env_specs(config: EnvConfig) -> EnvBase:
    """An env with the specs of ``make_env(config)``'s training env, for sizing a run before the agent exists.

    For the Iquitos site the specs follow from the site config alone (observation layout and socket count), so
    no dataset is built and no CityLearn loaded: :class:`~iquitos_lightning.envs.gym_env.SpecsOnly`. A Gymnasium
    id is cheap to build, so it is built. Close it after use.
    """
    if config.name != IQUITOS:
        return make_env(config)
    sockets = site_config_of(config.site).ev.socket_count
    names = observation_names(sockets, config.objective, resolve_observation(config.observation, config.layout))
    observation = gym.spaces.Box(-np.inf, np.inf, (len(names),), np.float32)
    action = gym.spaces.Box(-1.0, 1.0, (action_count(config.layout, sockets),), np.float32)
    specs = SpecsOnly(observation, action)
    if (
        config.training.critic_forecasts is not None
    ):  # the training twin's critic input too (EnvConfig requires the twin)
        observation_spec = specs.observation_spec.clone()  # (an env's own spec is locked)
        observation_spec[HINDSIGHT] = Unbounded(shape=(len(hindsight_names(names)),), dtype=torch.float32)
        specs.observation_spec = observation_spec
    return specs


def training_site(config: EnvConfig) -> LoadedSite:
    """The site a twin-backend ``config`` trains on, with the built series of ``training.train_site_seeds``' years
    (none: the twin trains on ``config.site``'s own year), each read once."""
    return load_site(config.site, Path(config.backend.data_root), config.training.train_site_seeds)


def training_years(config: EnvConfig) -> list[Any]:
    """The built series of ``config.train_site_seeds``' years (none: the twin trains on ``config.site``)."""
    return site_years(config.site, config.training.train_site_seeds or (), Path(config.backend.data_root))


def site_env_options(config: EnvConfig) -> dict[str, Any]:
    """The problem's options both Iquitos simulators take (action layout, EV guarantee, objective...): what an
    evaluation env gets; the training twin adds the training aids (:func:`twin_options`)."""
    return {
        "layout": config.layout,
        "idle_band": config.idle_band,
        "ev_guarantee": config.ev_guarantee,
        "observation": config.observation,
        "objective": config.objective,
        "demand_period": config.demand_period,
        "forecasts": config.forecasts,
    }


def worker_env_makers(config: EnvConfig) -> list[Callable[[], EnvBase]]:
    """One picklable env maker per collection worker (``num_workers`` of them): worker ``w`` trains on the
    seed stream ``episodes.seed + w * WORKER_SEED_STRIDE``; the twin backend is one batched env."""
    seeds = [config.episodes.seed + worker * WORKER_SEED_STRIDE for worker in range(config.backend.num_workers)]
    return [partial(_make_worker_env, config, seed) for seed in seeds]


def _make_worker_env(config: EnvConfig, base_seed: int) -> EnvBase:
    """Runs in the worker process: seeds its torch RNG (the policy's exploration noise) from the worker's seed,
    so a run with workers collects the same rollouts each time, then builds the env.

    The worker also ignores Ctrl-C and SIGTERM: a terminal sends SIGINT, and ``timeout``, ``kill -- -PGID``
    and batch schedulers send SIGTERM, to every process of the group, and a worker dying on it would break
    the rollout the training process is finishing before it saves a checkpoint (training/callbacks/interrupt.py);
    the training process shuts its workers down when the run ends (``close``, then SIGKILL if one hangs:
    agents/collection.py). Both arrive blocked (the collector starts its workers with them blocked), so one
    sent while the worker was still importing is discarded here rather than killing it.
    """
    if threading.current_thread() is threading.main_thread():
        for signum in WORKER_IGNORED_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, WORKER_IGNORED_SIGNALS)
    torch.manual_seed(base_seed)
    if config.on_twin:
        return make_env(config)
    return _make_single_env(config, base_seed)


def _make_single_env(
    config: EnvConfig, base_seed: int, *, evaluation: bool = False, site: str | SiteConfig | None = None
) -> EnvBase:
    gym_env = _make_gym_env(config, evaluation=evaluation, site=site)
    seeding = EpisodeSeeding(FiniteValues(gym_env, config.name), base_seed)
    if is_flat_box_env(seeding):
        return FlatGymEnv(seeding)  # the Iquitos site, Pendulum...: one layer instead of four (envs/gym_env.py)
    return general_torchrl_env(seeding)


def general_torchrl_env(seeding: EpisodeSeeding) -> EnvBase:
    """TorchRL's general stack over any Gymnasium env, writing the keys :class:`FlatGymEnv` writes."""
    env = TransformedEnv(GymWrapper(seeding, device="cpu"))
    if _has_float64(env):  # the Iquitos env is float32 already: a no-op transform still costs a pass per step
        env.append_transform(DoubleToFloat())
    env.append_transform(StepCounter())
    env.append_transform(RewardSum())
    return env


def twin_options(config: EnvConfig) -> dict[str, Any]:
    """The keyword arguments of the twin a twin-backend ``config`` trains on (:func:`~iquitos_lightning.envs.twin.
    make_twin`'s) but its reference tables (``references``, control/training_references.py): also what the bench's plain
    loops build their bare twin from, so both sides step the same site, envs, layout, objective, observation, starts
    and years."""
    return {"data_root": Path(config.backend.data_root), "years": training_years(config), **twin_settings(config)}


def twin_settings(config: EnvConfig) -> dict[str, Any]:
    """:func:`twin_options` but the site's files and years: the twin's batch, starts, episode and reward options."""
    return {
        "num_envs": config.backend.num_envs,
        "compile_physics": config.backend.compile,
        "start": config.training.start,
        "episode_hours": config.training.episode_hours,
        "seed": config.episodes.seed,
        "stored_energy_value": config.training.stored_energy_value,
        "shaping_gamma": config.training.shaping_gamma,
        **site_env_options(config),
    }


def _has_float64(env: EnvBase) -> bool:
    """Whether any observation or the reward is float64 (what ``DoubleToFloat`` converts)."""
    specs = [*env.observation_spec.values(True, True), env.reward_spec]
    return any(spec.dtype == torch.float64 for spec in specs)


def episode_seeding(env: EnvBase) -> EpisodeCounter:
    """The :class:`EpisodeSeeding` wrapper inside an env made by :func:`make_env` (the twin itself for the twin:
    it is deterministic, so its reset counter is all there is to restore)."""
    base = _innermost(env)
    if isinstance(base, FlatGymEnv):
        seeding = base.gym_env
    elif isinstance(base, GymWrapper):
        seeding = base._env  # GymWrapper keeps the Gymnasium env it wraps there
    elif isinstance(base, EpisodeCounter):
        return base  # the twin counts its own resets
    else:
        seeding = None
    if not isinstance(seeding, EpisodeSeeding):
        raise TypeError("env was not built by make_env(): no EpisodeSeeding wrapper inside")
    return seeding


@runtime_checkable
class ResumesAnywhere(Protocol):
    """A training env whose whole state can be saved and put back (the twin), so a run resumes exactly in the
    middle of its episodes, not only at an episode boundary (agents/resume.py)."""

    def resume_state(self) -> dict[str, Any]: ...

    def load_resume_state(self, saved: dict[str, Any]) -> None: ...


def resumes_anywhere(env: EnvBase) -> ResumesAnywhere | None:
    """The env inside ``env`` (made by :func:`make_env`) that saves and restores its whole state: the twin; None for
    CityLearn and Gymnasium envs, which resume exactly only from an episode boundary."""
    base = _innermost(env)
    return base if isinstance(base, ResumesAnywhere) else None


def _innermost(env: EnvBase) -> EnvBase:
    """The env under a ``TransformedEnv``'s transforms; the training twin and :class:`FlatGymEnv` are their own."""
    return getattr(env, "base_env", env)


def site_env(env: EnvBase) -> Any | None:
    """The :class:`~iquitos_lightning.envs.citylearn.IquitosEnv` inside ``env``; None for other tasks and the twin."""
    seeding = episode_seeding(env)
    if not isinstance(seeding, EpisodeSeeding):
        return None
    inner = seeding.unwrapped
    return inner if hasattr(inner, "flows") and hasattr(inner, "departures") else None
