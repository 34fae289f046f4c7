"""The base of the on-line agents: the learning loop's shared plumbing, each concern in its own module.

Why one base: SAC, PPO and A2C differ only in how they learn from a rollout; the loop around that is the same and
easy to get subtly wrong, so it lives here once:

- **Data**: a TorchRL collector feeds ``training_step`` through :class:`~.collection.CollectorStream`, in this process
  or in workers (:mod:`.collection`). One Lightning "epoch" is one evaluation period (``eval_every_frames``), so
  validation runs after each period through Lightning's own loop; the stream has a length, so Lightning does not
  prefetch: every rollout is collected with the weights of the latest update (with ``overlap``: the one before).
- **Budget**: training stops when ``frames_done`` reaches ``frame_budget`` (env frames), not on ``max_steps``
  (Lightning's ``global_step`` counts optimizer steps: one per SAC update, several per PPO rollout).
- **Envs**: built from :class:`~iquitos_lightning.envs.factory.EnvConfig`, kept in a plain holder, never as child
  modules (Lightning would move them to the GPU and checkpoint them).
- **Evaluation**: Lightning's validation and test loops hand out episode indices;
  :class:`~iquitos_lightning.training.callbacks.PolicyEvaluation` plays, logs and scores them (as SB3's
  ``EvalCallback``): the agent supplies its deterministic policy (:meth:`RLAgent.evaluate_episode`) and envs.
- **Health**: agents record their signals into :attr:`RLAgent.health` (:mod:`.health_signals`) while they learn; the
  base logs them under ``health/`` after each rollout, with the policy's drift over the period.
- **Update step**: :class:`~.update_step.GuardedUpdates` (planned fast path, non-finite guard, clip by value).
- **Resume**: counters, the env's episode counter, the RNG states and the agent's own state go into the checkpoint
  (the twin's episodes in progress too), and a checkpoint that does not fit is refused (:mod:`.resume`).

What callbacks read from an agent is typed in :mod:`.contract`; on-policy and off-policy learning add their own
layer (:mod:`.on_policy`, :mod:`.off_policy`); the algorithms are the math on top.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torchrl.envs import EnvBase

from iquitos_lightning.agents.collection import CollectorStream, RolloutCollection
from iquitos_lightning.agents.config import RolloutConfig, as_config, check_rollout_config, evaluation_period, plain
from iquitos_lightning.agents.contract import PlaysEvaluations
from iquitos_lightning.agents.episodes import play_episode
from iquitos_lightning.agents.guards import NonFiniteGuard
from iquitos_lightning.agents.health_signals import HealthSignals
from iquitos_lightning.agents.resume import CheckpointedState, PendingResume
from iquitos_lightning.agents.site_envs import make_agent_env
from iquitos_lightning.agents.speed import SpeedConfig
from iquitos_lightning.agents.update_step import GuardedUpdates
from iquitos_lightning.agents.workload import configured_workload, env_workload, update_memory
from iquitos_lightning.envs.env_config import TRAINING_DEVICE, EnvConfig
from iquitos_lightning.fastpath.distribution_bounds import MovesDistributionBounds
from iquitos_lightning.fastpath.rollout_logging import log_rollout_metrics
from iquitos_lightning.fastpath.tanh_normal import collection_policy
from iquitos_lightning.profile.hardware import cuda_free_and_total_bytes
from iquitos_lightning.profile.memory_budget import DeviceEstimate, Workload, check_device_fits


class _Runtime:
    """Non-module holder of the envs and the collector (kept out of ``nn.Module`` registration)."""

    def __init__(self, train_env: EnvBase) -> None:
        self.train_env = train_env
        self.eval_env: EnvBase | None = None
        self.selection_env: EnvBase | None = None  # the selection year's evaluation env (env.validation_site_seed)
        self.collection = RolloutCollection()  # the collector of the fit in progress


class RLAgent(MovesDistributionBounds, GuardedUpdates, CheckpointedState, pl.LightningModule):
    """Base of the on-line agents. Subclasses build their networks in ``__init__`` from :attr:`train_env`'s
    specs and implement :meth:`learn` (and :meth:`configure_optimizers`); see ``sac.py`` for the pattern.
    """

    algorithm: str | None = None  # "sac", "ppo" or "a2c": how memory is estimated; None: not estimated
    off_policy = False  # learns from data of older policies (may collect with rollout.overlap)
    actor_log_prob = True  # the actor writes its action's log-probability at collection (PPO, A2C; not SAC)
    # Dataclass groups of the constructor's arguments, by name (what the auto profile fills when left unset).
    config_groups: ClassVar[dict[str, type]] = {"env": EnvConfig, "rollout": RolloutConfig, "speed": SpeedConfig}

    def __init__(
        self, env: EnvConfig | None = None, rollout: RolloutConfig | None = None, speed: SpeedConfig | None = None
    ) -> None:
        super().__init__()
        self.env_config = as_config(EnvConfig, env)
        self.rollout_config = as_config(RolloutConfig, rollout)
        self.speed_config = as_config(SpeedConfig, speed)
        parallel_envs = self.env_config.backend.num_workers * self.env_config.backend.num_envs
        check_rollout_config(self.rollout_config, parallel_envs, type(self).__name__, self.off_policy)
        self.save_hyperparameters()
        for key in list(self.hparams):
            self.hparams[key] = plain(self.hparams[key])
        self._runtime = _Runtime(make_agent_env(self.env_config))
        self.frames_done = 0
        self.updates_done = 0
        self.episodes_done = 0
        self.last_episode_return: float | None = None
        self.at_episode_boundary = True
        self.pending_resume = PendingResume()  # what a loaded checkpoint puts back before the first rollout
        self.nonfinite = NonFiniteGuard(self.rollout_config.max_nonfinite_in_a_row)
        self.health = HealthSignals()  # this rollout's health signals, recorded by the agent as it learns

    # ----- what subclasses provide ---------------------------------------------------------------
    @property
    def exploration_policy(self) -> TensorDictModule:
        """The module the collector runs (sampling actions)."""
        raise NotImplementedError

    @property
    def evaluated_policy(self) -> TensorDictModule:
        """The module evaluations and tests run, deterministically: the exploration policy, unless the agent keeps
        an average of its weights for that (``policy_average``: ``averaged_actor``, agents/policy_average.py)."""
        averaged = getattr(self, "averaged_actor", None)
        return self.exploration_policy if averaged is None else averaged.module

    def collector_options(self) -> dict[str, Any]:
        """Extra ``Collector`` arguments (SAC: the random frames still to collect)."""
        return {}

    def learn(self, rollout: TensorDictBase) -> dict[str, torch.Tensor | float]:
        """Learn from one rollout (on the CPU); return the scalars to log."""
        raise NotImplementedError

    def loss_terms(self, batch: TensorDictBase) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The summed loss to back-propagate and the detached terms to log (what ``compile`` compiles)."""
        raise NotImplementedError

    def update(self, batch: TensorDictBase) -> dict[str, torch.Tensor]:
        """One gradient step on ``batch`` (what ``cuda_graphs`` captures): losses via :meth:`compute_losses`,
        backward, optimizer steps; returns detached metrics and changes no Python state."""
        raise NotImplementedError

    def update_rows(self) -> tuple[int, int]:
        """Rows of one backward pass and rows moved to the device per rollout (for the device-memory check)."""
        frames = self.rollout_config.frames_per_batch
        return frames, frames

    def fixed_update_shapes(self) -> bool:
        """Whether every update sees the same batch shape (required by CUDA graphs)."""
        return True

    def agent_state(self) -> dict[str, Any]:
        """State beyond weights and optimizers that resume needs (the replay buffer)."""
        return {}

    def load_agent_state(self, state: dict[str, Any]) -> None:
        pass

    def forget_episodes_in_progress(self) -> None:
        """A resumed run starts fresh episodes after all (the saved twin state did not fit): drop what was kept of
        the saved ones (on-policy agents: the reward normaliser's returns in progress)."""

    # ----- envs and collector ----------------------------------------------------------------------
    @property
    def train_env(self) -> EnvBase:
        return self._runtime.train_env

    @property
    def collection(self) -> RolloutCollection:
        return self._runtime.collection

    @property
    def eval_env(self) -> EnvBase:
        if self._runtime.eval_env is None:
            self._runtime.eval_env = make_agent_env(self.env_config, evaluation=True)
        return self._runtime.eval_env

    @property
    def selects_policy(self) -> bool:
        """Whether evaluations also score a selection year (``env.validation_site_seed``): BestCheckpoint reads it."""
        return self.env_config.validation_site_seed is not None

    @property
    def selection_env(self) -> EnvBase | None:
        """The evaluation env of the selection year (``env.validation_site_seed``); None when there is none."""
        if not self.selects_policy:
            return None
        if self._runtime.selection_env is None:
            self._runtime.selection_env = make_agent_env(self.env_config, evaluation=True, selection=True)
        return self._runtime.selection_env

    def evaluate_on(self, backend: str) -> None:
        """Evaluations from now on run on ``backend`` (``citylearn`` or ``twin``): the final test of a run that
        evaluated on the twin while training is a year on CityLearn itself (cli.py, ``final_test``)."""
        if backend == self.env_config.backend.evaluate:
            return
        evaluate_on = dataclasses.replace(self.env_config.backend, evaluate=backend)
        self.env_config = dataclasses.replace(self.env_config, backend=evaluate_on)  # validated again
        runtime = self._runtime
        for env in (runtime.eval_env, runtime.selection_env):
            if env is not None:
                env.close()
        runtime.eval_env = runtime.selection_env = None

    @property
    def frame_budget(self) -> int:
        return self.rollout_config.frame_budget

    def current_period(self) -> tuple[int, int]:
        """Frames at the start and end of the evaluation period in progress (end capped at the budget)."""
        return evaluation_period(self.frames_done, self.rollout_config)

    def train_dataloader(self) -> CollectorStream:
        rollout, collection = self.rollout_config, self._runtime.collection
        collection.stop()
        if self.env_config.backend.device == TRAINING_DEVICE:  # the twin steps where the agent trains
            self._runtime.train_env = self.train_env.to(self.device)
        # The exploration policy through the fast TanhNormal sampler: the same actions, ~4x cheaper per frame.
        policy = collection_policy(self.exploration_policy, noise_hold_steps=rollout.noise_hold_steps)
        collection.start(
            self.env_config, self.train_env, policy, frames_per_batch=rollout.frames_per_batch,
            overlap=rollout.overlap, policy_device=self.device, **self.collector_options(),
        )  # fmt: skip
        return CollectorStream(self)

    def on_fit_end(self) -> None:
        self._runtime.collection.stop()

    def next_rollout(self) -> TensorDictBase:
        return self._runtime.collection.next_rollout()

    def transfer_batch_to_device(self, batch: Any, device: torch.device, dataloader_idx: int) -> Any:
        """Rollouts stay on the CPU (they go into host-side buffers); agents move what they train on."""
        return batch

    # ----- training ----------------------------------------------------------------------------------
    def on_fit_start(self) -> None:
        self.forget_update_plan()  # planned again for this fit's device
        if self.speed_config.threads is not None:
            torch.set_num_threads(self.speed_config.threads)
        if self.device.type == "cuda" and self.algorithm is not None:
            free, _ = cuda_free_and_total_bytes(self.device.index or 0)  # IQUITOS_GPU_MEMORY_CAP_GIB applies
            hint = "Lower the batch or rollout size or --model.hidden_sizes, or try --profile auto."
            if self.env_config.backend.device == TRAINING_DEVICE:
                hint = "Lower env.backend.num_envs or the rollout size, or step the twin on the CPU: backend.device cpu"
            check_device_fits(self.device_memory_estimate(), free, torch.cuda.get_device_name(self.device), hint)
        fit_loop = self.trainer.fit_loop
        if fit_loop.max_epochs != -1:
            rank_zero_info(f"RL agent: the frame budget ({self.frame_budget:,} frames) ends training, not max_epochs")
            fit_loop.max_epochs = -1

    def training_step(self, rollout: TensorDictBase, batch_idx: int) -> dict[str, float]:
        _, period_end = self.current_period()
        self.health.watch_drift(self.exploration_policy, rollout)
        finished_return = self._count_rollout(rollout)
        metrics = self.learn(rollout)
        # on the evaluation period's last rollout the health signals also say how far the policy moved
        signals = self.health.take(self.exploration_policy, period_ended=self.frames_done >= period_end)
        self._runtime.collection.sync_weights()
        logged = {f"train/{key}": float(value) for key, value in metrics.items()}
        logged |= {f"health/{key}": value for key, value in signals.items()}
        logged["progress/frames_done"] = float(self.frames_done)
        logged["progress/updates_done"] = float(self.updates_done)
        logged["train/nonfinite_skipped"] = float(self.nonfinite.skipped_total)
        if finished_return is not None:
            logged["train/episode_return"] = finished_return
        return logged  # logged in on_train_batch_end (Lightning's outputs), once the budget check has run

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Stop at the frame budget, then log the rollout's metrics: what ``self.log_dict`` in ``training_step``
        would log, without its cost (fastpath/rollout_logging.py). Here and not in ``training_step`` because Lightning
        also logs the batch on which a hook asked to stop (this budget check, an interrupt, a time limit), and those
        hooks run after ``training_step``; this module's hook runs after every callback's."""
        if self.frames_done >= self.frame_budget:
            self.trainer.should_stop = True
        if isinstance(outputs, Mapping):  # what training_step returned (Lightning's copy)
            log_rollout_metrics(self.trainer, outputs)

    def _count_rollout(self, rollout: TensorDictBase) -> float | None:
        """Count the rollout's frames and finished episodes; the mean return of those that finished (None: none)."""
        self.frames_done += rollout.numel()
        done = rollout["next", "done"].reshape(-1)
        finished = rollout["next", "episode_reward"].reshape(-1)[done]
        self.at_episode_boundary = bool(done[-1])
        if not finished.numel():
            return None
        self.episodes_done += int(finished.numel())
        self.last_episode_return = float(finished[-1])
        return float(finished.mean())

    # ----- sizes the memory checks read ------------------------------------------------------------------
    @classmethod
    def workload(cls, env: EnvBase, frames_per_batch: int) -> Workload:
        """The sizes that decide memory for this agent on ``env`` (:func:`~.workload.env_workload`)."""
        return env_workload(env, frames_per_batch, cls.actor_log_prob)

    @classmethod
    def profile_workload(cls, model_args: Mapping[str, Any]) -> Workload:
        """:meth:`workload` from the configured arguments, before any agent exists (the auto profile's input)."""
        return configured_workload(model_args, cls.actor_log_prob)

    def device_memory_estimate(self) -> DeviceEstimate:
        """Device memory one update needs with these settings: checked at the start of every fit on CUDA, so a run
        that cannot fit refuses before its first rollout."""
        workload = self.workload(self.train_env, self.rollout_config.frames_per_batch)
        estimate = update_memory(str(self.algorithm), workload, self.hparams, self.update_rows())
        if self.env_config.backend.device != TRAINING_DEVICE:
            return estimate
        # the twin moves to the device with its rollouts: its tables and step, and the collector's rollout beside
        # the copy the update reads (agents/collection.py)
        rollout = self.rollout_config.frames_per_batch * workload.transition_bytes
        twin = getattr(self.train_env, "base_env", self.train_env)  # under a residual wrapper: its base env
        return dataclasses.replace(estimate, env=twin.device_bytes() + rollout)

    # ----- evaluation: Lightning's loops hand out episodes, PolicyEvaluation plays and logs them ---------------
    def val_dataloader(self) -> list[int]:
        return list(range(self.rollout_config.eval_episodes))

    def test_dataloader(self) -> list[int]:
        return list(range(self.rollout_config.eval_episodes))

    def validation_step(self, episode: int, batch_idx: int) -> None:
        """Nothing: :class:`~iquitos_lightning.training.callbacks.PolicyEvaluation` plays episode ``episode`` (after
        this step, in ``on_validation_batch_end``), scores it and logs it."""

    def test_step(self, episode: int, batch_idx: int) -> None:
        """Nothing: :class:`~iquitos_lightning.training.callbacks.PolicyEvaluation` plays and logs the episode."""

    def on_validation_start(self) -> None:
        self._warn_without_evaluation()

    def on_test_start(self) -> None:
        self._warn_without_evaluation()

    def _warn_without_evaluation(self) -> None:
        if not any(isinstance(callback, PlaysEvaluations) for callback in self.trainer.callbacks):
            rank_zero_warn(
                "no PolicyEvaluation among the Trainer's callbacks: the evaluation episodes are not played or logged "
                "(add callbacks=[iquitos_lightning.callbacks.PolicyEvaluation()]; the CLI adds it)"
            )

    def evaluate_episode(self, episode: int, env: EnvBase | None = None) -> tuple[float, TensorDictBase]:
        """Return and rollout of evaluation episode ``episode`` of ``env`` (the evaluation env unless given) under
        the deterministic policy (:func:`~.episodes.play_episode`)."""
        env = self.eval_env if env is None else env
        return play_episode(self.evaluated_policy, env, episode, self.rollout_config.max_eval_steps, self.device)
