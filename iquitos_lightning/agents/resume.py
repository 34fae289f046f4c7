"""What a checkpoint adds for an exact resume, and the refusal of a checkpoint that does not fit this run.

Why a module of its own: resuming is where RL runs silently go wrong. Besides weights and optimizers
(Lightning's), an agent's checkpoint holds under ``rl_state`` its counters, the env's episode counter,
every global RNG and whatever the agent adds (SAC: the replay buffer; PPO and A2C: the reward normaliser),
plus its identity (agent class, task, observation and action sizes). A checkpoint of another agent, task or
network size is refused naming what differs, before torch fails on a tensor shape.

How exact a resume is depends on the training env (collected in the training process; with collection
workers see agents/collection.py):

- **The twin resumes exactly anywhere.** Its whole state is a few tensors, so ``rl_state["env_state"]``
  holds it (:meth:`~iquitos_lightning.envs.twin.IquitosTwin.resume_state`: clocks, episode starts, the
  schedule's next starts and generator, SOCs, peaks, last observations, the reset counter) with what the
  collector carries to its next rollout (the last observation, step counts, episode returns:
  :mod:`iquitos_lightning.fastpath.collector_carrier`), and the reward normaliser keeps its returns in
  progress. The resumed run puts them back right before its first rollout (after the new collector's own
  reset) and goes on in the middle of the same episodes: a run killed at any checkpoint and resumed ends
  with the uninterrupted run's weights (``tests/agents/test_resume_twin.py``). A saved state that does
  not fit the run (another ``num_envs``) gives fresh episodes, with a warning.
- **CityLearn and Gymnasium envs resume exactly from an episode boundary.** A run resumed from a checkpoint
  taken at a boundary repeats the uninterrupted run exactly (each episode is seeded by its index:
  :func:`env_resets_on_resume`); one taken mid-episode starts a fresh episode (CityLearn cannot restore
  the middle of one), with buffer, counters and RNGs intact.

The ``rl_state`` keys are the same as before the package was split into layers, so checkpoints written
by earlier versions resume unchanged (``tests/agents/test_resume.py`` loads one).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from lightning.pytorch.utilities import rank_zero_warn
from torchrl.collectors import BaseCollector

from iquitos_lightning.agents.collection import RolloutCollection, collects_in_process
from iquitos_lightning.agents.guards import NonFiniteGuard
from iquitos_lightning.envs.env_config import EnvConfig
from iquitos_lightning.envs.factory import ResumesAnywhere, episode_seeding, resumes_anywhere, site_env
from iquitos_lightning.errors import ConfigError
from iquitos_lightning.fastpath.collector_carrier import carried_state, continue_from

IDENTITY_KEYS = ("agent", "observation_size", "action_size")  # what must match for the weights to load


def rng_states() -> dict[str, Any]:
    """Every global RNG the training path draws from, as tensors and ints (safe for ``weights_only`` loads)."""
    numpy_state = np.random.get_state()
    states: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "keys": torch.from_numpy(numpy_state[1].astype(np.int64)),
            "pos": int(numpy_state[2]),
            "has_gauss": int(numpy_state[3]),
            "cached_gaussian": float(numpy_state[4]),
        },
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict[str, Any]) -> None:
    """Put back what :func:`rng_states` saved."""
    torch.set_rng_state(states["torch"])
    numpy_state = states["numpy"]
    np.random.set_state(
        (
            "MT19937",
            numpy_state["keys"].numpy().astype(np.uint32),
            numpy_state["pos"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )
    random.setstate(states["python"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def env_resets_on_resume(resets_done: int, at_episode_boundary: bool) -> int:
    """The env's episode counter to restore (CityLearn and Gymnasium; the twin restores its whole state): at a
    boundary the collector has already reset into an episode with no frames yet, so the resumed run repeats that
    reset (same seed); mid-episode it starts the next episode."""
    return max(resets_done - 1, 0) if at_episode_boundary else resets_done


def describe_identity(identity: Mapping[str, Any]) -> str:
    """``SAC on iquitos site 'tiny' (observation size 40, action size 5)``: what a checkpoint was trained as."""
    task = identity.get("env")
    if identity.get("site"):
        task = f"{task} site {identity['site']!r}"
    return (
        f"{identity.get('agent')} on {task} (observation size {identity.get('observation_size')}, "
        f"action size {identity.get('action_size')})"
    )


def refuse_unfit_checkpoint(
    checkpoint: Mapping[str, Any], here: Mapping[str, Any], own_state: Mapping[str, torch.Tensor]
) -> None:
    """Raise :class:`ConfigError`, naming what differs, when ``checkpoint`` is of another agent, task or network
    size than this run (``here``: its identity; ``own_state``: its ``state_dict``)."""
    saved = checkpoint.get("rl_state", {}).get("identity")
    if saved is not None:
        differs = [key for key in IDENTITY_KEYS if saved.get(key) != here[key]]
        if differs:
            raise ConfigError(
                f"--ckpt_path: the checkpoint is of {describe_identity(saved)}, this run is "
                f"{describe_identity(here)} ({', '.join(differs)} differ): use a checkpoint of the same agent "
                "and site, or start without --ckpt_path"
            )
    theirs = checkpoint.get("state_dict", {})
    mismatched = sorted(key for key in own_state.keys() & theirs.keys() if own_state[key].shape != theirs[key].shape)
    missing, unexpected = sorted(own_state.keys() - theirs.keys()), sorted(theirs.keys() - own_state.keys())
    if mismatched or missing or unexpected:
        first = (mismatched or missing or unexpected)[0]
        raise ConfigError(
            f"--ckpt_path: the checkpoint's networks do not fit this {here['agent']} ({len(mismatched)} tensors "
            f"of another shape, {len(missing)} missing, {len(unexpected)} unexpected, e.g. {first!r}): it was "
            "saved with other model.hidden_sizes or by another agent or site; use a checkpoint of this "
            "configuration, or start without --ckpt_path"
        )


def merged_optimizer_state(states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One optimizer's state dict from several optimizers' (in order): their parameter groups one after another, the
    parameters renumbered as torch numbers those of one optimizer (consecutively through its groups), each with its
    state (Adam's moments and step). What lets a checkpoint of an agent that had an optimizer per network resume in an
    agent that has one optimizer with a group per network (SAC, whose checkpoints once held an Adam per network)."""
    merged: dict[str, Any] = {"state": {}, "param_groups": []}
    offset = 0
    for state in states:
        for group in state["param_groups"]:
            merged["param_groups"].append({**group, "params": [offset + index for index in group["params"]]})
        merged["state"].update({offset + index: value for index, value in state["state"].items()})
        offset += sum(len(group["params"]) for group in state["param_groups"])
    return merged


def episodes_state(env: ResumesAnywhere | None, collector: BaseCollector | None) -> dict[str, Any] | None:
    """The training env's whole state and what the collector carries to its next rollout, when the env can save it
    (the twin; None otherwise): what lets a run resume exactly in the middle of its episodes."""
    if env is None or collector is None:
        return None
    return {"env": env.resume_state(), "collector": carried_state(collector)}


class PendingResume:
    """What a loaded checkpoint puts back right before the first rollout, once the collector is built (building it
    reset the env): the twin's and the collector's state when the checkpoint has them, then the RNG states."""

    def __init__(self) -> None:
        self.rng: dict[str, Any] | None = None
        self.episodes: dict[str, Any] | None = None  # episodes_state() of the checkpoint (the twin's runs)

    @property
    def continues_saved_episodes(self) -> bool:
        return self.episodes is not None

    def restore(
        self, env: ResumesAnywhere | None, collector: BaseCollector | None, forget_episodes: Callable[[], None]
    ) -> None:
        """Put back what is pending, then forget it. Saved episodes that do not fit this run (another ``num_envs``)
        give fresh episodes, said, and ``forget_episodes`` drops what the agent kept of the saved ones."""
        if self.episodes is not None:
            try:
                env.load_resume_state(self.episodes["env"])
                continue_from(collector, self.episodes["collector"])
            except ValueError as error:
                rank_zero_warn(f"--ckpt_path: the run goes on with fresh episodes, not the saved ones: {error}")
                collector.reset()
                forget_episodes()
            self.episodes = None
        if self.rng is not None:
            set_rng_states(self.rng)
            self.rng = None


class CheckpointedState:
    """The checkpoint hooks of :class:`~.base.RLAgent`, mixed into it: ``rl_state`` saved and loaded, the pending state
    put back before the first rollout, and the identity a checkpoint must match. Why apart from the base: what a
    checkpoint holds and how it is put back is this module's job (module docstring); the base is the learning loop.
    The agent provides the attributes below and ``train_env``, ``collection``, ``agent_state``, ``load_agent_state``,
    ``forget_episodes_in_progress`` and ``state_dict``."""

    env_config: EnvConfig
    rollout_config: Any
    nonfinite: NonFiniteGuard
    pending_resume: PendingResume
    frames_done: int
    updates_done: int
    episodes_done: int
    last_episode_return: float | None
    at_episode_boundary: bool
    collection: RolloutCollection

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Worker processes keep their own episode counters (collection.py: resume exact in-process only).
        in_process = collects_in_process(self.env_config, self.rollout_config.overlap)
        resets = episode_seeding(self.train_env).resets_done if in_process else 0
        episodes = self.pending_resume.episodes  # resumed, not collecting yet: the env still holds a fresh reset
        if episodes is None:
            episodes = episodes_state(resumes_anywhere(self.train_env), self.collection.collector)
        checkpoint["rl_state"] = {
            "frames_done": self.frames_done,
            "updates_done": self.updates_done,
            "episodes_done": self.episodes_done,
            "last_episode_return": self.last_episode_return,
            "at_episode_boundary": self.at_episode_boundary,
            "env_resets_on_resume": env_resets_on_resume(resets, self.at_episode_boundary),
            "env_state": episodes if in_process else None,
            "rng": rng_states(),
            "agent": self.agent_state(),
            "nonfinite_skipped": self.nonfinite.skipped_total,
            "identity": self.identity(),
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.check_checkpoint_fits(checkpoint)
        state = checkpoint.get("rl_state")
        if state is None:
            return
        self.frames_done = int(state["frames_done"])
        self.updates_done = int(state["updates_done"])
        self.episodes_done = int(state["episodes_done"])
        self.last_episode_return = state["last_episode_return"]
        self.at_episode_boundary = bool(state["at_episode_boundary"])
        self.pending_resume.episodes = None
        if collects_in_process(self.env_config, self.rollout_config.overlap):
            episode_seeding(self.train_env).resets_done = int(state["env_resets_on_resume"])
            if state.get("env_state") is not None and resumes_anywhere(self.train_env) is not None:
                self.pending_resume.episodes = state["env_state"]  # put back once the collector is built
        self.pending_resume.rng = state["rng"]
        self.load_agent_state(state["agent"])
        self.nonfinite.skipped_total = int(state.get("nonfinite_skipped", 0))

    @property
    def continues_saved_episodes(self) -> bool:
        """Whether this run, resumed from a checkpoint, will go on in the middle of the saved episodes (the twin,
        collected in this process) rather than start fresh ones: what ``load_agent_state`` may ask (it is True
        from ``on_load_checkpoint`` to the first rollout, which puts the saved state back)."""
        return self.pending_resume.continues_saved_episodes

    def restore_pending_state(self) -> None:
        """Right before the first rollout (the collector is built, its construction has reset the env): put back
        the checkpoint's env and collector state, when it has one (the twin), then its RNG states."""
        collector = self.collection.collector
        self.pending_resume.restore(resumes_anywhere(self.train_env), collector, self.forget_episodes_in_progress)

    def identity(self) -> dict[str, Any]:
        """What a checkpoint must match to be loaded into this agent: its class, task and tensor sizes."""
        site = site_env(self.train_env)
        return {
            "agent": type(self).__name__,
            "env": self.env_config.name,
            "site": site.site_config.name if site is not None else None,
            "observation_size": int(self.train_env.observation_spec["observation"].shape[-1]),
            "action_size": int(self.train_env.action_spec.shape[-1]),
        }

    def check_checkpoint_fits(self, checkpoint: dict[str, Any]) -> None:
        """Refuse, naming what differs, a checkpoint of another agent, task or network size (before torch does)."""
        refuse_unfit_checkpoint(checkpoint, self.identity(), self.state_dict())
