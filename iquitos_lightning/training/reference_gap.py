"""A site year's rule-to-optimum gap: its two ends, from the site's ``baselines.json`` (or computed on the twin), and
the share of it that a policy's bill (``tariff``) or return (``thesis``) closes.

Why a module of its own: two places report the gap of a policy on the evaluation year and must read the same ends, the
final test's line (training/final_evaluation.py) and the evaluation lines of a log read from a file
(training/callbacks/progress_lines.py); the callbacks cannot import the final evaluation, which imports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iquitos_lightning.control.reference_results import current_references
from iquitos_lightning.envs.objectives import TARIFF, THESIS
from iquitos_lightning.report.comparison import gap_closed_pct
from iquitos_lightning.site.config import load_site_config

RESULTS = Path("results")  # where `baselines` writes results/<site>/baselines.json (compare's default too)
# per objective: the references' column for its value, and what to call it (the test's row holds the bill as
# tariff_cost, and the thesis return as its episode return)
OBJECTIVE_VALUE = {TARIFF: ("tariff_cost", "bill"), THESIS: ("thesis_return", "return")}


@dataclass(frozen=True)
class ReferenceGap:
    """The rule-based controller's and the objective's optimum's figures on one year, and where they come from."""

    objective: str
    rule: float
    best: float
    source: str

    def closed_pct(self, row: Mapping[str, float]) -> float:
        """The share (%) of the gap that ``row`` closes: its ``tariff_cost`` on ``tariff``, its ``episode_return``
        (the thesis return) on ``thesis``."""
        mine = row["tariff_cost"] if self.objective == TARIFF else row["episode_return"]
        return gap_closed_pct(mine, self.rule, self.best)


def reference_gap(
    site: Path, objective: str, results: Path = RESULTS, *, compute_missing: bool = False
) -> ReferenceGap | None:
    """The gap of ``site``'s year on ``objective`` from ``results/<site>/baselines.json`` (the references the README's
    tables use). With no such file for this exact site config: None, or with ``compute_missing`` on the tariff
    objective, that year's rule-based and optimum bills computed now on the twin (a test year of the profile has no
    ``baselines.json``: configs/site/test-years/)."""
    if objective not in OBJECTIVE_VALUE:
        return None
    site_config = load_site_config(site)
    references = current_references(results, site_config)
    column = OBJECTIVE_VALUE[objective][0]
    if references is None:
        if not (compute_missing and objective == TARIFF):
            return None
        rule, best = year_ends(site_config)
        source = f"this year's references, computed now on the twin: no {results / site_config.name}/baselines.json"
    else:
        values = references["objectives"][objective]
        rule, best = values["rule_based"][column], values[f"optimum_{objective}"][column]
        source = str(results / site_config.name / "baselines.json")
    return ReferenceGap(objective, float(rule), float(best), source)


def year_ends(site_config: Any) -> tuple[float, float]:
    """The rule-based controller's and the tariff optimum's bills of ``site_config``'s year, on the twin."""
    # lazy: the LP and the twin only when a test year asks
    from iquitos_lightning.control.site_years import gap_ends, year_env

    return gap_ends(year_env(site_config, site_config.seed), site_config.seed)
