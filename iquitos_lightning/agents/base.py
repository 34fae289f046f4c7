"""The base of the on-line agents: collector as dataloader, frame budget, evaluation, logging, checkpoints.

Why one base: SAC, PPO and A2C differ only in how they learn from a rollout; everything else is
the same and easy to get subtly wrong, so it lives here once, each concern in its own module:

- **Data**: a TorchRL collector on CPU envs feeds ``training_step`` through
  :class:`CollectorStream` (the train dataloader): in this process, or in worker processes with
  ``env.backend.num_workers`` or ``rollout.overlap`` (:mod:`.collection`). One Lightning "epoch" is one
  evaluation period (``eval_every_frames``), so validation runs after each period through Lightning's
  own loop. The stream has a length, so Lightning does not prefetch: every rollout is collected with the
  weights of the latest update (with ``overlap``: of the update before, by design).
- **Budget**: training stops when ``frames_done`` reaches ``frame_budget`` (env frames), not on
  ``max_steps`` (Lightning's ``global_step`` counts optimizer steps: one per SAC update, several per PPO rollout).
- **Env**: built from :class:`~iquitos_lightning.envs.factory.EnvConfig` and kept in a plain holder,
  never as a child ``nn.Module`` (Lightning would move it to the GPU and checkpoint it).
- **Evaluation**: validation/test roll out the deterministic policy over full episodes of a
  separate env with fixed seeds, under a forked RNG so evaluating never changes training; the
  return is logged, plus the site KPIs (:mod:`iquitos_lightning.metrics.kpis`) when the env is the
  Iquitos site; after ``test`` the agent's KPI row is :meth:`RLAgent.test_kpi_row` (the run report
  writes it). With a selection year (``env.validation_site_seed``) each validation also scores that year
  (``select/*``, :mod:`.selection`): what picks ``best.ckpt``, never the evaluation year itself.
- **Update step**: agents call :meth:`RLAgent.run_update`, which runs their ``update`` through the
  fast-path switches planned once per fit (:mod:`.speed`), and step their optimizers through
  :meth:`RLAgent.apply_gradients`, which skips an update whose loss or gradient is non-finite (:mod:`.guards`).
- **Resume**: counters, the env's episode counter, the RNG states and whatever the agent adds go into
  the checkpoint (with the twin collected in this process, also the twin's state and what the collector carries
  to its next rollout: such a run resumes exactly mid-episode), and a checkpoint that does not fit is refused
  (:mod:`.resume`).

What callbacks read from an agent is typed in :mod:`.contract`. On-policy and off-policy learning
add their own layer (:mod:`.on_policy`, :mod:`.off_policy`); the algorithms are the math on top.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import lightning.pytorch as pl
import numpy as np
import pandas as pd
import torch
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torch.utils.data import IterableDataset
from torchrl.collectors import BaseCollector
from torchrl.envs import EnvBase, ExplorationType, set_exploration_type

from iquitos_lightning.agents.collection import collects_in_process, make_collector, shutdown_workers
from iquitos_lightning.agents.config import RolloutConfig, as_config, plain
from iquitos_lightning.agents.guards import NonFiniteGuard, backward_and_step
from iquitos_lightning.agents.health import DriftProbe
from iquitos_lightning.agents.networks import make_actor
from iquitos_lightning.agents.replay import bytes_per_transition
from iquitos_lightning.agents.resume import env_resets_on_resume, refuse_unfit_checkpoint, rng_states, set_rng_states
from iquitos_lightning.agents.selection import SELECTION_METRIC, SELECTION_STAGE, selection_score
from iquitos_lightning.agents.site_envs import make_agent_env
from iquitos_lightning.agents.speed import PlannedUpdate, SpeedConfig, planned_update
from iquitos_lightning.envs.factory import (
    EnvConfig,
    env_specs,
    episode_seeding,
    resumes_anywhere,
    site_env,
)
from iquitos_lightning.envs.objectives import tariff_bill
from iquitos_lightning.errors import ConfigError
from iquitos_lightning.fastpath.collector_carrier import carried_state, continue_from
from iquitos_lightning.fastpath.collector_weights import pushes_weights_itself
from iquitos_lightning.fastpath.distribution_bounds import MovesDistributionBounds
from iquitos_lightning.fastpath.rollout_logging import log_rollout_metrics
from iquitos_lightning.fastpath.tanh_normal import collection_policy, evaluation_policy
from iquitos_lightning.metrics.kpis import compute_kpis
from iquitos_lightning.profile.hardware import cuda_free_and_total_bytes
from iquitos_lightning.profile.memory_budget import (
    DeviceEstimate,
    Workload,
    check_device_fits,
    device_estimate,
    network_shapes,
)


class _Runtime:
    """Non-module holder of the envs and the collector (kept out of ``nn.Module`` registration)."""

    def __init__(self, train_env: EnvBase) -> None:
        self.train_env = train_env
        self.eval_env: EnvBase | None = None
        self.selection_env: EnvBase | None = None  # the selection year's evaluation env (env.validation_site_seed)
        self.last_evaluated: EnvBase | None = None  # the env of the latest evaluation episode (its flows: the report)
        self.collector: BaseCollector | None = None
        self.collection_policy: Any = None  # what the collector runs (fastpath/tanh_normal.py)
        self.iterator: Any = None
        self.update: PlannedUpdate | None = None  # the agent's update as it runs here (planned once per fit)
        self.last_update_applied = True  # False when apply_gradients skipped the update in progress
        self.drift_probe: DriftProbe | None = None  # the period's first observations and actions (health.py)
        self.checked_gradient_norm: torch.Tensor | None = None  # of the step in progress (apply_gradients)


class CollectorStream(IterableDataset):
    """The train dataloader: rollouts from the agent's collector until the end of the current evaluation period.

    Its length is the number of batches of the current period (counted from the period's start, so a
    run resumed mid-period ends the epoch at the same frame). ``state_dict`` is empty on purpose:
    the agent's checkpoint holds everything needed to continue.
    """

    def __init__(self, agent: RLAgent) -> None:
        self.agent = agent

    def __len__(self) -> int:
        start, end = self.agent.current_period()
        return math.ceil((end - start) / self.agent.rollout_config.frames_per_batch)

    def __iter__(self):
        agent = self.agent
        agent.restore_pending_state()
        _, end = agent.current_period()
        while agent.frames_done < end:
            yield agent.next_rollout()

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass


class RLAgent(MovesDistributionBounds, pl.LightningModule):
    """Base of the on-line agents. Subclasses build their networks in ``__init__`` from :attr:`train_env`'s
    specs and implement :meth:`learn` (and :meth:`configure_optimizers`); see ``sac.py`` for the pattern.
    """

    algorithm: str | None = None  # "sac", "ppo" or "a2c": how memory is estimated; None: not estimated
    off_policy = False  # learns from data of older policies (may collect with rollout.overlap)
    actor_log_prob = True  # the actor writes its action's log-probability at collection (PPO, A2C; not SAC)
    # reads the non-finite check's gradient norm before each step (take_checked_gradient_norm; PPO and A2C clip with
    # it): the check computes one only then (guards.backward_and_step)
    reads_checked_gradient_norm = False
    # Dataclass groups of the constructor's arguments, by name (what the auto profile fills when left unset).
    config_groups: ClassVar[dict[str, type]] = {"env": EnvConfig, "rollout": RolloutConfig, "speed": SpeedConfig}

    def __init__(
        self, env: EnvConfig | None = None, rollout: RolloutConfig | None = None, speed: SpeedConfig | None = None
    ) -> None:
        super().__init__()
        self.env_config = as_config(EnvConfig, env)
        self.rollout_config = as_config(RolloutConfig, rollout)
        self.speed_config = as_config(SpeedConfig, speed)
        self._check_rollout_config()
        self.save_hyperparameters()
        for key in list(self.hparams):
            self.hparams[key] = plain(self.hparams[key])
        self._runtime = _Runtime(make_agent_env(self.env_config))
        self.frames_done = 0
        self.updates_done = 0
        self.episodes_done = 0
        self.last_episode_return: float | None = None
        self.at_episode_boundary = True
        self._pending_rng: dict[str, Any] | None = None
        self._pending_env_state: dict[str, Any] | None = None  # the twin's and the collector's (resume.py)
        self._test_kpis: list[dict[str, float]] = []  # KPIs of each test episode (mean: test_kpi_row)
        self.nonfinite = NonFiniteGuard(self.rollout_config.max_nonfinite_in_a_row)

    # ----- what subclasses provide ---------------------------------------------------------------
    @property
    def exploration_policy(self) -> TensorDictModule:
        """The module the collector runs (sampling actions)."""
        raise NotImplementedError

    @property
    def evaluated_policy(self) -> TensorDictModule:
        """The module evaluations and tests run, deterministically: the exploration policy, unless an agent keeps
        an average of its weights for that (SAC's ``policy_average``)."""
        return self.exploration_policy

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
        self.env_config = dataclasses.replace(
            self.env_config, backend=dataclasses.replace(self.env_config.backend, evaluate=backend)
        )  # validated again
        runtime = self._runtime
        for env in (runtime.eval_env, runtime.selection_env):
            if env is not None:
                env.close()
        runtime.eval_env = runtime.selection_env = runtime.last_evaluated = None

    @property
    def frame_budget(self) -> int:
        return self.rollout_config.frame_budget

    def _check_rollout_config(self) -> None:
        config = self.rollout_config
        positive = ("frame_budget", "frames_per_batch", "max_eval_steps", "max_nonfinite_in_a_row", "noise_hold_steps")
        for name in positive:
            value = getattr(config, name)
            if value <= 0:
                raise ConfigError(f"model.rollout.{name} must be a positive integer, got {value}")
        if config.overlap and not self.off_policy:
            raise ConfigError(
                f"model.rollout.overlap: {type(self).__name__} learns on-policy, so it cannot learn from a rollout "
                "collected by the previous policy; use model.env.backend.num_workers to collect in parallel instead"
            )
        if config.eval_episodes < 0:
            raise ConfigError(f"model.rollout.eval_episodes must be 0 or more, got {config.eval_episodes}")
        parallel = self.env_config.backend.num_workers * self.env_config.backend.num_envs
        if config.frames_per_batch % parallel:
            raise ConfigError(
                f"model.rollout.frames_per_batch ({config.frames_per_batch}) must be a multiple of the parallel envs "
                f"(model.env.backend.num_workers x num_envs = {parallel}): each collects the same share of a rollout"
            )
        if config.eval_every_frames <= 0 or config.eval_every_frames % config.frames_per_batch:
            nearest = config.frames_per_batch * max(config.eval_every_frames // config.frames_per_batch, 1)
            raise ConfigError(
                f"model.rollout.eval_every_frames ({config.eval_every_frames}) must be a positive multiple of "
                f"model.rollout.frames_per_batch ({config.frames_per_batch}): an evaluation period is a whole "
                f"number of rollouts, e.g. {nearest}"
            )

    def current_period(self) -> tuple[int, int]:
        """Frames at the start and end of the evaluation period in progress (end capped at the budget)."""
        period = self.rollout_config.eval_every_frames
        batch = self.rollout_config.frames_per_batch
        budget = math.ceil(self.frame_budget / batch) * batch
        if self.frames_done >= budget:
            return self.frames_done, self.frames_done
        start = (self.frames_done // period) * period
        return start, min(start + period, budget)

    def train_dataloader(self) -> CollectorStream:
        self.shutdown_collector()
        # The exploration policy through the fast TanhNormal sampler: the same actions, ~4x cheaper per frame.
        self._runtime.collection_policy = collection_policy(
            self.exploration_policy, noise_hold_steps=self.rollout_config.noise_hold_steps
        )
        self._runtime.collector = make_collector(
            self.env_config,
            self.train_env,
            self._runtime.collection_policy,
            frames_per_batch=self.rollout_config.frames_per_batch,
            overlap=self.rollout_config.overlap,
            policy_device=self.device,
            **self.collector_options(),
        )
        return CollectorStream(self)

    def shutdown_collector(self) -> None:
        """Stop the collector's worker processes (if any) and forget it; the next fit builds a new one."""
        runtime = self._runtime
        if runtime.collector is not None and not collects_in_process(self.env_config, self.rollout_config.overlap):
            shutdown_workers(runtime.collector)
        runtime.collector = runtime.iterator = None

    def on_fit_end(self) -> None:
        self.shutdown_collector()

    def next_rollout(self) -> TensorDictBase:
        runtime = self._runtime
        if runtime.iterator is None:
            runtime.iterator = iter(runtime.collector)
        return next(runtime.iterator)

    def transfer_batch_to_device(self, batch: Any, device: torch.device, dataloader_idx: int) -> Any:
        """Rollouts stay on the CPU (they go into host-side buffers); agents move what they train on."""
        return batch

    # ----- training ----------------------------------------------------------------------------------
    def on_fit_start(self) -> None:
        self._runtime.update = None  # planned again for this fit's device
        if self.speed_config.threads is not None:
            torch.set_num_threads(self.speed_config.threads)
        if self.device.type == "cuda" and self.algorithm is not None:
            free, _ = cuda_free_and_total_bytes(self.device.index or 0)  # IQUITOS_GPU_MEMORY_CAP_GIB applies
            hint = "Lower the batch or rollout size or --model.hidden_sizes, or try --profile auto."
            check_device_fits(self.device_memory_estimate(), free, torch.cuda.get_device_name(self.device), hint)
        fit_loop = self.trainer.fit_loop
        if fit_loop.max_epochs != -1:
            rank_zero_info(f"RL agent: the frame budget ({self.frame_budget:,} frames) ends training, not max_epochs")
            fit_loop.max_epochs = -1

    def training_step(self, rollout: TensorDictBase, batch_idx: int) -> dict[str, float]:
        _, period_end = self.current_period()
        if self._runtime.drift_probe is None:
            self._runtime.drift_probe = DriftProbe.of(self.exploration_policy, rollout)
        finished_return = self._count_rollout(rollout)
        metrics = self.learn(rollout)
        if self.frames_done >= period_end:  # the evaluation period's last rollout: how far did the policy move?
            metrics["health/policy_drift"] = self._runtime.drift_probe.drift(self.exploration_policy)
            self._runtime.drift_probe = None
        collector = self._runtime.collector
        if (
            collector is not None
            and not pushes_weights_itself(collector)
            and collector.policy is not self._runtime.collection_policy
        ):
            collector.update_policy_weights_()
        logged = {key if key.startswith("health/") else f"train/{key}": float(value) for key, value in metrics.items()}
        logged["progress/frames_done"] = float(self.frames_done)
        logged["progress/updates_done"] = float(self.updates_done)
        logged["train/nonfinite_skipped"] = float(self.nonfinite.skipped_total)
        if finished_return is not None:
            logged["train/episode_return"] = finished_return
        return logged  # logged in on_train_batch_end (Lightning's outputs), once the budget check has run

    @classmethod
    def workload(cls, env: EnvBase, frames_per_batch: int) -> Workload:
        """The sizes that decide memory (:mod:`~iquitos_lightning.profile.memory_budget`) for this agent on ``env``:
        observation and action size, and the bytes of one stored transition with what the collector stores next
        to it (the actor's outputs): an upper bound, as the replay buffer keeps only what the updates read
        (``stored_keys``; 582 of these 630 B on SAC's tariff profile)."""
        example = env.fake_tensordict()
        with torch.no_grad():
            make_actor(env, (8,), return_log_prob=cls.actor_log_prob)(example)
        return Workload(
            observation_dim=int(example["observation"].shape[-1]),
            action_dim=int(env.action_spec.shape[-1]),
            transition_bytes=bytes_per_transition(example),
            frames_per_batch=frames_per_batch,
        )

    @classmethod
    def profile_workload(cls, model_args: Mapping[str, Any]) -> Workload:
        """:meth:`workload` from the configured arguments, before any agent exists (the auto profile's input): the
        env's specs are read without building a site (:func:`~iquitos_lightning.envs.factory.env_specs`)."""
        env = env_specs(as_config(EnvConfig, model_args.get("env")))
        try:
            return cls.workload(env, as_config(RolloutConfig, model_args.get("rollout")).frames_per_batch)
        finally:
            env.close()

    def device_memory_estimate(self) -> DeviceEstimate:
        """Device memory one update needs with these settings: checked at the start of every fit on CUDA, so a run
        that cannot fit refuses before its first rollout."""
        workload = self.workload(self.train_env, self.rollout_config.frames_per_batch)
        hidden, policy_scale = tuple(self.hparams["hidden_sizes"]), self.hparams.get("policy_scale", "state")
        shapes = network_shapes(str(self.algorithm), workload, hidden, policy_scale)
        return device_estimate(shapes, *self.update_rows(), workload.transition_bytes)

    def make_adam(self, params: Any, lr: float) -> torch.optim.Adam:
        """Adam, ``capturable`` when the update will be captured in a CUDA graph (its step counter stays on the GPU).

        ``foreach``: one multi-tensor kernel per step instead of a Python loop over parameters (PyTorch picks it
        by itself on CUDA only; on the CPU the loop was a visible share of a small-network update). Same arithmetic.
        ``speed.fused_adam``: torch's fused kernel instead (faster again; not the same bits: agents/speed.py),
        except in a CUDA graph, which keeps the capturable ``foreach`` step.
        """
        capturable = self.speed_config.cuda_graphs and self.device.type == "cuda"
        if self.speed_config.fused_adam and not capturable:
            return torch.optim.Adam(params, lr=lr, fused=True)
        return torch.optim.Adam(params, lr=lr, capturable=capturable, foreach=True)

    def compute_losses(self, batch: TensorDictBase) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """:meth:`loss_terms`, compiled when ``speed.compile`` is on."""
        return self._planned_update().loss_fn(batch)

    def run_update(self, batch: TensorDictBase) -> dict[str, torch.Tensor]:
        """One :meth:`update` through the planned fast path; counts it unless it was skipped as non-finite."""
        update_fn = self._planned_update().update_fn
        self._runtime.last_update_applied = True
        metrics = update_fn(batch)
        self.updates_done += int(self._runtime.last_update_applied)
        return metrics

    @property
    def attached_to_trainer(self) -> bool:
        """Whether a Trainer runs this module (Lightning's ``trainer`` property raises when none does)."""
        try:
            return self.trainer is not None
        except RuntimeError:
            return False

    @property
    def planned_speed(self) -> SpeedConfig | None:
        """The speed switches this fit's updates really run with (after :func:`plan_speed` refused what the device
        or precision cannot do); None before the first update."""
        return None if self._runtime.update is None else self._runtime.update.speed

    def _planned_update(self) -> PlannedUpdate:
        if self._runtime.update is None:
            precision = str(self.trainer.precision) if self.attached_to_trainer else "32-true"
            self._runtime.update = planned_update(
                self.speed_config, self.device, precision, self.fixed_update_shapes(), self.loss_terms, self.update
            )
        return self._runtime.update

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Stop at the frame budget, then log the rollout's metrics: what ``self.log_dict`` in ``training_step``
        would log, without its cost (fastpath/rollout_logging.py). Here and not in ``training_step`` because Lightning
        also logs the batch on which a hook asked to stop (this budget check, an interrupt, a time limit), and those
        hooks run after ``training_step``; this module's hook runs after every callback's."""
        if self.frames_done >= self.frame_budget:
            self.trainer.should_stop = True
        if isinstance(outputs, Mapping):  # what training_step returned (Lightning's copy)
            log_rollout_metrics(self.trainer, outputs)

    def apply_gradients(
        self, total: torch.Tensor, losses: Mapping[str, torch.Tensor], terms_of_param_groups: Sequence[str]
    ) -> bool:
        """Backward ``total`` and step every optimizer, unless a loss term or a gradient is non-finite
        (:func:`~iquitos_lightning.agents.guards.backward_and_step`).

        ``terms_of_param_groups`` names, per parameter group (the optimizers' groups, in ``configure_optimizers``
        order), the loss term its gradients come from. A faulty update is skipped and counted; after
        ``max_nonfinite_in_a_row`` in a row
        :class:`~iquitos_lightning.agents.guards.NonFiniteTraining` stops the run. Returns whether the update was
        applied (also recorded for :meth:`run_update`'s count).
        """
        optimizers = self.optimizers()
        optimizers = list(optimizers) if isinstance(optimizers, list | tuple) else [optimizers]
        fault = backward_and_step(
            optimizers,
            self.manual_backward,
            total,
            losses,
            terms_of_param_groups,
            check=self._planned_update().checked,
            gradients_checked_by_scaler=getattr(self.trainer.precision_plugin, "scaler", None) is not None,
            checked_norm=self.keep_checked_gradient_norm
            if len(optimizers) == 1 and self.reads_checked_gradient_norm
            else None,
        )
        self._runtime.last_update_applied = fault is None
        if fault is None:
            self.nonfinite.record_ok()
            return True
        if self.nonfinite.record_skip(fault, self.frames_done, self.updates_done):
            rank_zero_warn(
                f"skipped an update: non-finite {fault} at frame {self.frames_done:,} "
                f"(stops after {self.nonfinite.max_in_a_row} in a row)"
            )
        return False

    def keep_checked_gradient_norm(self, norm: torch.Tensor | None) -> None:
        """The global norm of the gradients the non-finite check computed for the step about to run (one optimizer),
        or None; an agent that clips those gradients reads it once (:meth:`take_checked_gradient_norm`)."""
        self._runtime.checked_gradient_norm = norm

    def take_checked_gradient_norm(self) -> torch.Tensor | None:
        """The norm :meth:`keep_checked_gradient_norm` kept for this step, forgotten as it is read (None: none)."""
        norm, self._runtime.checked_gradient_norm = self._runtime.checked_gradient_norm, None
        return norm

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

    # ----- evaluation ----------------------------------------------------------------------------------
    def val_dataloader(self) -> list[int]:
        return list(range(self.rollout_config.eval_episodes))

    def test_dataloader(self) -> list[int]:
        return list(range(self.rollout_config.eval_episodes))

    def validation_step(self, episode: int, batch_idx: int) -> None:
        if self.selection_env is not None:
            episode_return, kpis = self._evaluate_episode(int(episode), SELECTION_STAGE, self.selection_env)
            score = selection_score(episode_return, kpis, self.env_config.objective)
            self.log(SELECTION_METRIC, score, on_epoch=True, batch_size=1)
        # the evaluation year last (its flows are the report's): the learning curve, never what a choice reads
        self._evaluate_episode(int(episode), "val")

    def test_step(self, episode: int, batch_idx: int) -> None:
        _, kpis = self._evaluate_episode(int(episode), "test")
        if kpis is not None:
            self._test_kpis.append(kpis)

    def on_test_epoch_start(self) -> None:
        self._test_kpis = []

    def test_kpi_row(self) -> dict[str, Any] | None:
        """This agent's KPI row of the last ``test``: who it is and the mean KPIs of its test episodes (None if the
        test env is not the site). :class:`~iquitos_lightning.training.callbacks.RunReport` writes it."""
        if not self._test_kpis:
            return None
        names = self._test_kpis[0].keys()
        means = {name: float(np.mean([kpis[name] for kpis in self._test_kpis])) for name in names}
        return {
            "controller": type(self).__name__,
            "site": self.env_config.site,
            "frames_trained": self.frames_done,
        } | means

    def evaluation_flows(self) -> tuple[pd.DataFrame, int] | None:
        """The last evaluation episode's hourly flows and calendar year, when the agent evaluates on the site.

        None when no evaluation ran: building an evaluation env only to find it empty cost a fit without
        evaluation 29 s (a CityLearn env of the 128-socket site) after 16 s of training."""
        if self._runtime.last_evaluated is None:
            return None
        site = site_env(self._runtime.last_evaluated)
        if site is None:
            return None
        flows = site.flows()
        if flows is None or len(flows) == 0:
            return None
        return flows, int(site.site_config.calendar.year)

    def evaluate_episode(self, episode: int, env: EnvBase | None = None) -> tuple[float, TensorDictBase]:
        """Return and rollout of evaluation episode ``episode`` of ``env`` (the evaluation env unless given) under
        the deterministic policy, in full precision; a TanhNormal actor runs as
        :class:`~iquitos_lightning.fastpath.tanh_normal.DeterministicTanhNormalPolicy` (the same actions, bit for
        bit, without a distribution built per step: a year is 8,760 sequential calls).

        Why autocast is off: Lightning casts ``validation_step`` under a mixed precision, while the collector (the
        dataloader) runs the same policy outside it; a bf16-mixed evaluation also handed the env bf16 actions, which
        NumPy has no type for (every bf16-mixed fit with evaluation crashed at its first evaluation)."""
        env = self.eval_env if env is None else env
        self._runtime.last_evaluated = env
        episode_seeding(env).resets_done = episode
        cuda = [self.device.index or 0] if self.device.type == "cuda" else []
        full_precision = torch.autocast(self.device.type, enabled=False)
        deterministic = set_exploration_type(ExplorationType.DETERMINISTIC)
        with torch.random.fork_rng(devices=cuda), torch.no_grad(), full_precision, deterministic:
            rollout = env.rollout(
                self.rollout_config.max_eval_steps,
                evaluation_policy(self.evaluated_policy),
                auto_cast_to_device=True,
                break_when_any_done=True,
            )
        return float(rollout["next", "reward"].sum()), rollout

    def _evaluate_episode(
        self, episode: int, stage: str, env: EnvBase | None = None
    ) -> tuple[float, dict[str, float] | None]:
        """Evaluate one episode of ``env`` (the evaluation env unless given) and log it under ``stage``: its return
        and, on the site, its KPIs (also returned; None on another env)."""
        env = self.eval_env if env is None else env
        episode_return, rollout = self.evaluate_episode(episode, env)
        self.log(f"{stage}/episode_return", episode_return, on_epoch=True, batch_size=1)
        self.log(f"{stage}/episode_length", float(rollout.numel()), on_epoch=True, batch_size=1)
        site = site_env(env)
        if site is None:
            return episode_return, None
        flows = site.flows()
        kpis = compute_kpis(flows, site.departures(), site.site_config)
        bill = tariff_bill(flows, site.site_config)  # the tariff objective's yardstick, whatever the agent optimises
        kpis |= {"tariff_cost": bill["tariff_cost"], "demand_charge": bill["demand_charge"]}
        self.log_dict({f"{stage}/kpi/{name}": value for name, value in kpis.items()}, on_epoch=True, batch_size=1)
        return episode_return, {"episode_return": episode_return, **kpis}

    # ----- checkpoints ---------------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Worker processes keep their own episode counters (collection.py: resume exact in-process only).
        in_process = collects_in_process(self.env_config, self.rollout_config.overlap)
        resets = episode_seeding(self.train_env).resets_done if in_process else 0
        checkpoint["rl_state"] = {
            "frames_done": self.frames_done,
            "updates_done": self.updates_done,
            "episodes_done": self.episodes_done,
            "last_episode_return": self.last_episode_return,
            "at_episode_boundary": self.at_episode_boundary,
            "env_resets_on_resume": env_resets_on_resume(resets, self.at_episode_boundary),
            "env_state": self._env_state() if in_process else None,
            "rng": rng_states(),
            "agent": self.agent_state(),
            "nonfinite_skipped": self.nonfinite.skipped_total,
            "identity": self.identity(),
        }

    @property
    def continues_saved_episodes(self) -> bool:
        """Whether this run, resumed from a checkpoint, will go on in the middle of the saved episodes (the twin,
        collected in this process) rather than start fresh ones: what ``load_agent_state`` may ask (it is True
        from ``on_load_checkpoint`` to the first rollout, which puts the saved state back)."""
        return self._pending_env_state is not None

    def _env_state(self) -> dict[str, Any] | None:
        """The training env's whole state and what the collector carries to its next rollout, when the env can save
        it (the twin; None otherwise): what lets a run resume exactly in the middle of its episodes."""
        if self._pending_env_state is not None:  # resumed, not collecting yet: the env still holds a fresh reset
            return self._pending_env_state
        env, collector = resumes_anywhere(self.train_env), self._runtime.collector
        if env is None or collector is None:
            return None
        return {"env": env.resume_state(), "collector": carried_state(collector)}

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
        self._pending_env_state = None
        if collects_in_process(self.env_config, self.rollout_config.overlap):
            episode_seeding(self.train_env).resets_done = int(state["env_resets_on_resume"])
            if state.get("env_state") is not None and resumes_anywhere(self.train_env) is not None:
                self._pending_env_state = state["env_state"]  # put back once the collector is built
        self._pending_rng = state["rng"]
        self.load_agent_state(state["agent"])
        self.nonfinite.skipped_total = int(state.get("nonfinite_skipped", 0))

    def restore_pending_state(self) -> None:
        """Right before the first rollout (the collector is built, its construction has reset the env): put back
        the checkpoint's env and collector state, when it has one (the twin), then its RNG states."""
        if self._pending_env_state is not None:
            self._continue_episodes(self._pending_env_state)
            self._pending_env_state = None
        if self._pending_rng is not None:
            set_rng_states(self._pending_rng)
            self._pending_rng = None

    def _continue_episodes(self, saved: dict[str, Any]) -> None:
        """The twin's state and the collector's carried state of the checkpoint, so the next rollout goes on in the
        middle of the saved episodes; if they do not fit this run (another ``num_envs``), fresh episodes, said."""
        env, collector = resumes_anywhere(self.train_env), self._runtime.collector
        try:
            env.load_resume_state(saved["env"])
            continue_from(collector, saved["collector"])
        except ValueError as error:
            rank_zero_warn(f"--ckpt_path: the run goes on with fresh episodes, not the saved ones: {error}")
            collector.reset()
            self.forget_episodes_in_progress()
