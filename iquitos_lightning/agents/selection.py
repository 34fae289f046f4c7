"""What picks the policy a run reports: its score on a selection year, a year it neither trains on nor reports.

Why: an agent's evaluations during training move a lot from one to the next (A2C's battery flips between charging
at noon and never charging within 128 updates, docs/experiments.md), so the policy at the end of the budget is a draw.
Keeping the best one is early stopping, and choosing it on the year that is then reported would flatter the row. With
``env.validation_site_seed`` every evaluation also runs one episode of that year (logged as ``select/*``), scored by
the objective's own yardstick, higher is better: minus the bill on ``tariff`` (what the tables report), the return
otherwise. :class:`~iquitos_lightning.training.callbacks.BestCheckpoint` keeps the best-scoring policy as
``best.ckpt``; ``final_test.policy: best`` tests it on the evaluation year.
"""

from __future__ import annotations

from iquitos_lightning.envs.objectives import TARIFF

SELECTION_STAGE = "select"  # the selection year's evaluation metrics: select/episode_return, select/kpi/<name>
SELECTION_METRIC = f"{SELECTION_STAGE}/score"  # higher is better


def selection_score(episode_return: float, kpis: dict[str, float] | None, objective: str | None) -> float:
    """The selection year's score of one evaluation: minus its bill on ``tariff`` (the objective's reward may be a
    training surrogate, e.g. a daily demand charge; the bill is what the tables compare), else the return."""
    if objective == TARIFF and kpis is not None:
        return -float(kpis["tariff_cost"])
    return float(episode_return)
