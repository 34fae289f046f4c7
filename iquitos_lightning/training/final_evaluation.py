"""The final test of a ``fit``: the trained policy's year on CityLearn itself, run by the same command.

Why: the card's profiles train and evaluate at intervals on the twin (bit-equal to CityLearn, ~10x faster for a
year), but the figure a user reports is CityLearn's own. With ``final_test.backend: citylearn`` a ``fit`` that ran
to its budget ends with ``test`` on that simulator: the KPI row goes to ``<run>/kpis.json`` (the file ``compare``
and the README name) and its report to ``<run>/report/test-<backend>/``, beside the fit's report rather than over
it. A stopped run (Ctrl-C, SIGTERM) is not tested: ``fit --ckpt_path last`` resumes it and tests at its end.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import lightning.pytorch as pl

from iquitos_lightning.agents import RLAgent
from iquitos_lightning.envs.factory import BACKENDS, IQUITOS
from iquitos_lightning.envs.objectives import TARIFF, THESIS
from iquitos_lightning.errors import ConfigError
from iquitos_lightning.report.comparison import gap_closed_pct
from iquitos_lightning.site.config import load_site_config
from iquitos_lightning.training.callbacks import RunReport
from iquitos_lightning.training.callbacks.report import report_dir

RESULTS = Path("results")  # where `baselines` writes results/<site>/baselines.json (compare's default too)
# per objective: the references' column for its value, and what to call it (the test's row holds the bill as
# tariff_cost, and the thesis return as its episode return)
OBJECTIVE_VALUE = {TARIFF: ("tariff_cost", "bill"), THESIS: ("thesis_return", "return")}


@dataclass
class FinalTest:
    """What ``fit`` runs once training has reached its budget."""

    backend: str | None = None  # "citylearn" or "twin": test the final policy on this simulator (None: no test)

    def __post_init__(self) -> None:
        if self.backend is not None and self.backend not in BACKENDS:
            raise ConfigError(f"final_test.backend must be one of {BACKENDS} or null, got {self.backend!r}")


def run_final_test(trainer: pl.Trainer, model: pl.LightningModule, backend: str) -> bool:
    """``trainer.test`` of ``model`` on ``backend`` when the fit ran to its budget; True when it ran."""
    if not isinstance(model, RLAgent) or trainer.interrupted or model.frames_done < model.frame_budget:
        return False
    model.evaluate_on(backend)
    for callback in trainer.callbacks:
        if isinstance(callback, RunReport):
            folder = Path(callback.dirpath) if callback.dirpath else report_dir(trainer)
            callback.dirpath = str(folder / f"test-{backend}")
    print(f"training reached its budget: testing the final policy on {backend} (one evaluation year) ...", flush=True)
    trainer.test(model, verbose=False)
    row = model.test_kpi_row()
    if row is not None:
        print(f"final test on {backend}: {final_figures(row)}", flush=True)
        env = model.env_config
        gap = gap_line(row, Path(env.site), env.objective) if env.name == IQUITOS else None
        if gap is not None:
            print(gap, flush=True)
    return True


def final_figures(row: dict) -> str:
    """The figures a user reports from a test's KPI row: return, bill (tariff runs) and EV energy unmet."""
    figures = [f"episode return {row['episode_return']:,.2f}"]
    if "tariff_cost" in row:
        figures.append(f"bill {row['tariff_cost']:,.0f} PEN (demand charge {row['demand_charge']:,.0f})")
    if "ev_unmet_kwh" in row:
        figures.append(f"EV energy unmet {row['ev_unmet_kwh']:,.0f} kWh")
    return ", ".join(figures)


def gap_line(row: dict, site: Path, objective: str, results: Path = RESULTS) -> str | None:
    """The test's share of the rule-to-optimum gap on ``objective``, from this site's ``baselines.json`` (the
    references the README's tables use); None when there is none for this exact site config (run ``baselines``)."""
    if objective not in OBJECTIVE_VALUE:
        return None
    # lazy: the references' module loads CityLearn, which `fit` on a Gymnasium env must not need
    from iquitos_lightning.control.baselines import current_references

    site_config = load_site_config(site)
    references = current_references(results, site_config)
    if references is None:
        return None
    path = results / site_config.name / "baselines.json"
    column, what = OBJECTIVE_VALUE[objective]
    values = references["objectives"][objective]
    rule, best = values["rule_based"][column], values[f"optimum_{objective}"][column]
    mine = row["tariff_cost"] if objective == TARIFF else row["episode_return"]
    shown = ",.0f" if objective == TARIFF else ",.2f"
    return (
        f"{gap_closed_pct(mine, rule, best):.1f} % of the rule-to-optimum gap on {objective} (rule-based {what} "
        f"{rule:{shown}}, optimum {best:{shown}}: {path})"
    )
