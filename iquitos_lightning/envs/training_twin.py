"""The twin as agents train on it: ``step_count``, ``episode_reward`` and the finite-value check in its own step.

Why not ``TransformedEnv(twin, StepCounter(), RewardSum(), FiniteTensorValues(...))``, the stack this replaces: a
transform chain is general (any key, nested envs, inverse transforms, spec rewriting) and pays for it on every step
and reset; collecting from the default site's 64-env twin with a random policy, this env runs 0.99-1.18x (median
1.07x) the stack's frames/s, level with the bare twin (docs/performance.md, "The training twin writes its own
counters"). The agents only read the
three things it added, so :class:`TrainingTwin` writes them itself, with the very keys, specs and values the stack
wrote (as :class:`~iquitos_lightning.envs.gym_env.FlatGymEnv` does for a Gymnasium env):

- ``step_count``: StepCounter's, the input's count + 1 at a step, 0 at a reset of that env (int64, [B, 1]);
- ``episode_reward``: RewardSum's, the input's sum + this step's reward in float32, 0 at a reset;
- the check that stops a run at a NaN or infinity in an observation or reward, naming it
  (:func:`~iquitos_lightning.envs.finite.check_finite_batch`). On a GPU the step skips it (it is a host sync) and
  whoever collects checks each rollout instead (:meth:`TrainingTwin.check_rollout`, agents/collection.py).

Like the transforms, the two counters are read from the tensordict a step or reset is given (what the collector
carries from the step before) rather than kept in the env: a run resumed from a checkpoint taken with the stack
carries them in the same place (fastpath/collector_carrier.py). ``tests/envs/test_training_twin.py`` collects with
both side by side, every key of every step equal, partial resets included.

With ``critic_forecasts="oracle"`` it also writes the critic's hindsight (envs/hindsight.py): the true PV and mall
load of the coming 24 hours at the same step, a training-only input no evaluation env has.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase
from torchrl.data import Bounded, Composite, Unbounded

from iquitos_lightning.envs.finite import check_finite_batch
from iquitos_lightning.envs.hindsight import HINDSIGHT, check_critic_forecasts, hindsight_table
from iquitos_lightning.envs.twin import IquitosTwin, make_twin

STEP_COUNT = "step_count"
EPISODE_REWARD = "episode_reward"
ENV_NAME = "iquitos twin"  # how a non-finite value's error names the env


class TrainingTwin(IquitosTwin):
    """:class:`~iquitos_lightning.envs.twin.IquitosTwin` with the step count, the running episode reward and the
    finite-value check written by its own step and reset (module docstring); arguments as the twin's, and
    ``critic_forecasts`` (None, or "oracle": also write the critic's hindsight, envs/hindsight.py)."""

    def __init__(self, *args: Any, critic_forecasts: str | None = None, **kwargs: Any) -> None:
        self._critic_forecasts = check_critic_forecasts(critic_forecasts)  # read by _load_tables, inside __init__
        super().__init__(*args, **kwargs)

    def _load_tables(self) -> None:
        super()._load_tables()
        self._hindsight_table: torch.Tensor | None = None
        if self._critic_forecasts is not None:  # [Y x T, K], the years one after the other as the other tables
            names = self.tables.observation_names
            parts = [hindsight_table(year, self.reward_scales, names) for year in self.years]
            self._hindsight_table = torch.tensor(np.concatenate(parts), dtype=torch.float32, device=self.device)

    def _make_specs(self) -> None:
        super()._make_specs()
        batch = self.batch_size
        if self._hindsight_table is not None:
            width = self._hindsight_table.shape[1]
            self.observation_spec[HINDSIGHT] = Unbounded(shape=(*batch, width), dtype=torch.float32, device=self.device)
        counters = Composite(
            {
                STEP_COUNT: Bounded(
                    0, torch.iinfo(torch.int64).max, shape=(*batch, 1), dtype=torch.int64, device=self.device
                ),
                EPISODE_REWARD: Unbounded(shape=(*batch, 1), dtype=torch.float32, device=self.device),
            },
            shape=batch,
            device=self.device,
        )
        self.observation_spec.update(counters.clone())
        self.state_spec = counters  # both transforms also declared their key as state (what a step reads back)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        """Both counters at 0; for a partial reset (``_reset`` masks some envs) TorchRL's ``reset`` keeps the other
        envs' entries of the tensordict it was given, counters included, as it keeps their observations."""
        fresh = super()._reset(tensordict, **kwargs)
        fresh.set(STEP_COUNT, self.observation_spec[STEP_COUNT].zero())
        fresh.set(EPISODE_REWARD, self.observation_spec[EPISODE_REWARD].zero())
        self._write_hindsight(fresh)
        if self.checks_every_step:
            check_finite_batch(fresh, ENV_NAME, self.tables.observation_names, "reset")
        return fresh

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        next_values = super()._step(tensordict)
        next_values.set(STEP_COUNT, tensordict.get(STEP_COUNT) + 1)
        next_values.set(EPISODE_REWARD, tensordict.get(EPISODE_REWARD, 0.0) + next_values.get("reward"))
        self._write_hindsight(next_values)
        if self.checks_every_step:
            check_finite_batch(next_values, ENV_NAME, self.tables.observation_names, "step")
        return next_values

    @property
    def checks_every_step(self) -> bool:
        """Whether each step checks its values are finite: on the CPU, where the check costs ~14 us; not on the device
        code path (``sync_free``: a GPU), where it would make every step wait for the device (the collector checks
        each rollout instead)."""
        return not self.sync_free

    def check_rollout(self, rollout: TensorDictBase) -> None:
        """The finite-value check of a whole rollout ([B, T], collected from this env): one host sync per rollout."""
        check_finite_batch(rollout["next"], ENV_NAME, self.tables.observation_names, "step")

    def _write_hindsight(self, values: TensorDictBase) -> None:
        """The hindsight row of each env's observation (the row its observation was read from: year offset + clock,
        the year's last hour for a finished episode's terminal observation, as the twin reads it)."""
        if self._hindsight_table is not None:
            rows = self._state.t.clamp_max(self.hours - 1) + self._row_offset
            values.set(HINDSIGHT, self._hindsight_table[rows])


def make_torchrl_twin(site: str | Path = "configs/site/iquitos-2026.yaml", **twin_options: Any) -> TrainingTwin:
    """The twin as agents see it: a :class:`TrainingTwin` of the site (``twin_options``: :func:`make_twin`'s keyword
    arguments: batch size, device, layout, objective, starts...)."""
    return make_twin(site, twin_class=TrainingTwin, **twin_options)
