"""One run of each side of the learner section: our agent through ``fit`` at an experiment profile's settings, and
the plain loop (:mod:`.plain_loops`) of the same algorithm with the same settings on the same twin.

Why the agent's own hyperparameters feed the plain loop: "the same settings" is only true if both sides read one
record. Our agent is built from the profile's ``model.init_args`` (with the bench's budget and no evaluation), and
the plain loop reads the built agent's ``hparams`` (the profile's values plus every default the agent filled in),
and steps the twin our agent's config builds (``twin_options``: the same site, envs, layout, objective, observation,
starts and episode length) as the bare :class:`~iquitos_lightning.envs.twin.IquitosTwin`, without the step count,
episode reward and finite check our training twin adds (envs/training_twin.py).
Training years (``env.training.train_site_seeds``) are left out on both sides: they change which rows of the tables
an env reads, not the work of a step, and the tiny site has none.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from benchmarks.bench.ours import FrameMarks
from benchmarks.bench.plain_loops import Mark, on_policy_settings, sac_settings, train_on_policy, train_sac
from benchmarks.bench.timing import setup_kept_out_of_collections
from benchmarks.bench.trainer import bare_trainer
from iquitos_lightning.agents import A2C, PPO, SAC, RLAgent
from iquitos_lightning.agents.config import as_config
from iquitos_lightning.control.training_references import reference_tables
from iquitos_lightning.envs.env_config import EnvConfig
from iquitos_lightning.envs.factory import twin_options
from iquitos_lightning.envs.twin import make_twin
from iquitos_lightning.profile.bases import profile_yaml

EXPERIMENT_PROFILES = {
    "PPO": "configs/experiments/tariff/ppo_fleet_tariff_twin_cpu.yaml",
    "A2C": "configs/experiments/tariff/a2c_fleet_tariff_twin_cpu.yaml",
    "SAC": "configs/experiments/tariff/sac_fleet_tariff_twin_cpu.yaml",
}
AGENTS: dict[str, type[RLAgent]] = {"PPO": PPO, "A2C": A2C, "SAC": SAC}


@dataclass(frozen=True)
class LearnerCase:
    """One algorithm at its experiment profile's settings, on ``site``, for a warm-up and ``timed_rollouts``."""

    algorithm: str  # "PPO", "A2C" or "SAC"
    site: str
    data_root: str = "data"
    timed_rollouts: int = 2
    observation: str | None = None  # None: the profile's (compact); "full": the 4-columns-per-socket layout
    overrides: Mapping[str, Any] = field(default_factory=dict)  # merged into the profile's init_args (quick runs)
    profile: str | None = None  # None: EXPERIMENT_PROFILES[algorithm]

    @property
    def profile_path(self) -> str:
        return self.profile or EXPERIMENT_PROFILES[self.algorithm]


def merged_settings(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` merged in, nested mappings key by key (neither is changed)."""
    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = merged_settings(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def profile_init_args(path: str | Path) -> dict[str, Any]:
    """The ``model.init_args`` of an experiment profile (a LightningCLI YAML)."""
    return profile_yaml(path)["model"]["init_args"]


def warmup_frames(algorithm: str, arguments: Mapping[str, Any]) -> int:
    """Frames before the timed window: one rollout (PPO/A2C: its first update pays one-time costs); SAC: the random
    frames, rounded up to rollouts, and the first learning rollout (the mark after it opens the window)."""
    frames = int(arguments["rollout"]["frames_per_batch"])
    if algorithm != "SAC":
        return frames
    random_rollouts = -(-int(arguments.get("init_random_frames", 0)) // frames)
    return max(random_rollouts, 1) * frames


def agent_arguments(case: LearnerCase) -> dict[str, Any]:
    """The profile's init_args with the case's site, overrides and budget: warm-up + timed rollouts, no evaluation."""
    arguments = merged_settings(profile_init_args(case.profile_path), case.overrides)
    env = arguments["env"]
    env["site"] = case.site
    env["backend"] = {**env.get("backend", {}), "data_root": str(case.data_root)}
    env.setdefault("training", {})["train_site_seeds"] = None
    if case.observation is not None:
        env["observation"] = case.observation
    frames = int(arguments["rollout"]["frames_per_batch"])
    budget = warmup_frames(case.algorithm, arguments) + case.timed_rollouts * frames
    arguments["rollout"].update(frame_budget=budget, eval_every_frames=budget, eval_episodes=0)
    return arguments


def build_agent(case: LearnerCase) -> RLAgent:
    return AGENTS[case.algorithm](**agent_arguments(case))


def agent_hparams(case: LearnerCase) -> dict[str, Any]:
    """Every hyperparameter the agent of ``case`` runs with (profile values and defaults), as plain values."""
    return dict(build_agent(case).hparams)


def run_project(case: LearnerCase, callbacks: Sequence[pl.Callback] = (), seed: int = 0) -> list[Mark]:
    """Fit our agent of ``case`` through Lightning (the bench's bare Trainer); the marks after every rollout. What
    was built before training starts is kept out of the garbage collector's scans while it trains (as the plain
    loop's setup: :func:`~.timing.setup_kept_out_of_collections`)."""
    pl.seed_everything(seed, verbose=False)
    agent = build_agent(case)
    marks = FrameMarks()
    bare_trainer(accelerator="cpu", callbacks=[marks, SetupKeptOutOfCollections(), *callbacks]).fit(agent)
    return marks.marks


def run_plain(case: LearnerCase, hparams: Mapping[str, Any], seed: int = 0) -> list[Mark]:
    """The plain loop of ``case.algorithm`` with ``hparams`` (:func:`agent_hparams`), as many rollouts as our agent's
    budget, on the twin our agent's env config builds; the marks after every rollout."""
    torch.manual_seed(seed)
    config = as_config(EnvConfig, dict(hparams["env"]))
    # bare: no step count, episode reward or finite check; the reference tables the agent's twin reads too
    twin = make_twin(config.site, references=reference_tables(config), **twin_options(config))
    rollouts = int(hparams["rollout"]["frame_budget"]) // int(hparams["rollout"]["frames_per_batch"])
    with setup_kept_out_of_collections():
        if case.algorithm == "SAC":
            return train_sac(twin, sac_settings(dict(hparams)), rollouts)
        return train_on_policy(twin, on_policy_settings(case.algorithm, dict(hparams)), rollouts)


class SetupKeptOutOfCollections(pl.Callback):
    """:func:`~.timing.setup_kept_out_of_collections` from the start of training to the end of the fit (teardown
    runs on an error too), for our side."""

    def __init__(self) -> None:
        self._open = ExitStack()

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._open.enter_context(setup_kept_out_of_collections())

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._open.close()
