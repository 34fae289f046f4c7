"""The evaluation of an agent's policy: its episodes played, logged, turned into KPIs and scored on the selection year.

Why a callback, as Stable-Baselines3's ``EvalCallback``: what an evaluation measures (the return, the site's KPIs,
the tariff bill) and which score picks the reported policy are questions about the run, not about how an agent
learns, and they are the same for every agent. The agent keeps what only it has: its deterministic policy
(:meth:`~iquitos_lightning.agents.base.RLAgent.evaluate_episode`) and its evaluation envs. Lightning's validation and
test loops still decide *when* (after each evaluation period, and in ``validate``/``test``): they hand out episode
indices, and this callback plays each one in ``on_validation_batch_end`` / ``on_test_batch_end`` and logs it through
the module, so ``ModelCheckpoint`` (``best.ckpt``), the loggers and the progress bar see the metrics as they would
from a ``validation_step``.

What it logs per episode (averaged over a loop's episodes): ``<stage>/episode_return``, ``<stage>/episode_length``
and, on the Iquitos site, ``<stage>/kpi/<name>`` (:mod:`iquitos_lightning.metrics.kpis`, plus the tariff bill),
for ``val`` and ``test``; with a selection year (``env.validation_site_seed``) each validation also plays that year
first, as ``select/*``, and logs ``select/score`` (:mod:`iquitos_lightning.agents.selection`): what picks
``best.ckpt``, never the evaluation year itself. After ``test`` it holds the agent's KPI row (:meth:`test_kpi_row`;
the run report writes it), and after any evaluation the last episode's hourly flows (:meth:`evaluation_flows`).

It must be attached wherever a Trainer evaluates an agent: the CLI adds it to every command (as it adds the progress
bar); a Trainer built in code takes ``callbacks=[PolicyEvaluation(), ...]``.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import numpy as np
import pandas as pd
from torchrl.envs import EnvBase

from iquitos_lightning.agents import RLAgent
from iquitos_lightning.agents.selection import SELECTION_METRIC, SELECTION_STAGE, selection_score
from iquitos_lightning.envs.factory import site_env
from iquitos_lightning.envs.objectives import tariff_bill
from iquitos_lightning.metrics.kpis import compute_kpis


class PolicyEvaluation(pl.Callback):
    """Plays, logs and scores the evaluation episodes of an :class:`~iquitos_lightning.agents.base.RLAgent` (module
    docstring); on any other LightningModule it does nothing."""

    def __init__(self) -> None:
        self._test_kpis: list[dict[str, float]] = []  # KPIs of each test episode (mean: test_kpi_row)
        self._last_evaluated: EnvBase | None = None  # the env of the latest episode (its flows: the report)

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._last_evaluated = None  # the agent may evaluate on another backend now (final_test): its old env is closed

    def on_validation_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:  # fmt: skip
        if not isinstance(pl_module, RLAgent):
            return
        episode = int(batch)
        if pl_module.selection_env is not None:
            episode_return, kpis = self._evaluate(pl_module, episode, SELECTION_STAGE, pl_module.selection_env)
            score = selection_score(episode_return, kpis, pl_module.env_config.objective)
            pl_module.log(SELECTION_METRIC, score, on_epoch=True, batch_size=1)
        # the evaluation year last (its flows are the report's): the learning curve, never what a choice reads
        self._evaluate(pl_module, episode, "val", pl_module.eval_env)

    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._last_evaluated = None

    def on_test_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._test_kpis = []

    def on_test_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:  # fmt: skip
        if not isinstance(pl_module, RLAgent):
            return
        _, kpis = self._evaluate(pl_module, int(batch), "test", pl_module.eval_env)
        if kpis is not None:
            self._test_kpis.append(kpis)

    def test_kpi_row(self, pl_module: pl.LightningModule) -> dict[str, Any] | None:
        """The agent's KPI row of the last ``test``: who it is and the mean KPIs of its test episodes (None if the
        test env is not the site). :class:`~iquitos_lightning.training.callbacks.RunReport` writes it."""
        if not self._test_kpis or not isinstance(pl_module, RLAgent):
            return None
        names = self._test_kpis[0].keys()
        means = {name: float(np.mean([kpis[name] for kpis in self._test_kpis])) for name in names}
        identity = {"controller": type(pl_module).__name__, "site": pl_module.env_config.site}
        return identity | {"frames_trained": pl_module.frames_done} | means

    def evaluation_flows(self) -> tuple[pd.DataFrame, int] | None:
        """The last evaluation episode's hourly flows and calendar year, when the agent evaluates on the site.

        None when no evaluation of the latest loop ran: building an evaluation env only to find it empty cost a fit
        without evaluation 29 s (a CityLearn env of the 128-socket site) after 16 s of training."""
        site = site_env(self._last_evaluated) if self._last_evaluated is not None else None
        if site is None:
            return None
        flows = site.flows()
        if flows is None or len(flows) == 0:
            return None
        return flows, int(site.site_config.calendar.year)

    def _evaluate(
        self, agent: RLAgent, episode: int, stage: str, env: EnvBase
    ) -> tuple[float, dict[str, float] | None]:
        """Play one episode of ``env`` and log it under ``stage``: its return and, on the site, its KPIs (also
        returned; None on another env)."""
        self._last_evaluated = env
        episode_return, rollout = agent.evaluate_episode(episode, env)
        agent.log(f"{stage}/episode_return", episode_return, on_epoch=True, batch_size=1)
        agent.log(f"{stage}/episode_length", float(rollout.numel()), on_epoch=True, batch_size=1)
        site = site_env(env)
        if site is None:
            return episode_return, None
        flows = site.flows()
        kpis = compute_kpis(flows, site.departures(), site.site_config)
        bill = tariff_bill(flows, site.site_config)  # the tariff objective's yardstick, whatever the agent optimises
        kpis |= {"tariff_cost": bill["tariff_cost"], "demand_charge": bill["demand_charge"]}
        agent.log_dict({f"{stage}/kpi/{name}": value for name, value in kpis.items()}, on_epoch=True, batch_size=1)
        return episode_return, {"episode_return": episode_return, **kpis}


def policy_evaluation(trainer: pl.Trainer) -> PolicyEvaluation | None:
    """The trainer's :class:`PolicyEvaluation` (None: none attached)."""
    return next((callback for callback in trainer.callbacks if isinstance(callback, PolicyEvaluation)), None)
