"""References on any year of the site profile, on the twin: the bills the tuning and the test-year tables read.

Why: one year is a development set once every choice has been made by reading it. Training years tune the
practitioner's MPC (experiments/tune_reference.py), test years that no choice ever read report every row; each needs
the same thing: the site profile drawn from another seed (envs/site_data.py: ``site_year``), built once under
``data/``, a controller run through the bit-equal twin, and its bill split into energy and demand charge per month.
The rule-based controller and the perfect-foresight optimum of that year are the ends of its gap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from iquitos_lightning.control.mpc import MPCController
from iquitos_lightning.control.objective_lp import solve_year
from iquitos_lightning.control.references import Controller, PlanController, RuleBasedController
from iquitos_lightning.control.robust_mpc import RobustMPCController, RobustSettings
from iquitos_lightning.control.rollout import run_controller
from iquitos_lightning.control.tariff_rule import TariffRuleController
from iquitos_lightning.envs.objectives import TARIFF, monthly_bill, tariff_bill
from iquitos_lightning.envs.site_data import built_site, site_config_of, site_year
from iquitos_lightning.envs.twin import make_twin
from iquitos_lightning.envs.twin_site import TwinSite
from iquitos_lightning.site.config import SiteConfig
from iquitos_lightning.site.series import SiteSeries

RULE, OPTIMUM = "rule_based", f"optimum_{TARIFF}"
# The tariff ladder's rungs, best to worst information: the year's optimum, MPC with the true coming hours (what the
# 24 h horizon alone loses), the practitioner's hedged MPC and the certainty-equivalent one (what forecasts lose).
LADDER = (OPTIMUM, f"mpc_perfect_{TARIFF}", f"mpc_robust_{TARIFF}", f"mpc_forecast_{TARIFF}", "tariff_rule", RULE)


@dataclass
class YearBill:
    """One controller on one site year: the year's bill, its months, and the EV service and import it took."""

    controller: str
    site_seed: int
    bill: dict[str, float]  # tariff_bill: demand_charge, tariff_cost, ...
    months: pd.DataFrame  # monthly_bill
    max_import_kw: float
    ev_unmet_kwh: float
    seconds: float

    @property
    def tariff_cost(self) -> float:
        return float(self.bill["tariff_cost"])


def year_env(site: str | Path | SiteConfig, seed: int, data_root: Path = Path("data")) -> TwinSite:
    """The twin of the site profile's year ``seed`` (built under ``data_root`` once), for a controller."""
    config = site_year(site_config_of(site), seed)
    build = built_site(config, data_root)
    return TwinSite(make_twin(config, data_root=build.path.parent, record=True))


def year_before(site_config: SiteConfig, data_root: Path = Path("data")) -> SiteSeries:
    """The series of the year before ``site_config``'s: the profile drawn from the seed before (the site's years are
    independent draws of one profile, consecutive seeds standing for consecutive years; every draw keeps the
    profile's calendar, so its last days are a December, not the weekdays of the real one), built once."""
    return built_site(site_year(site_config, site_config.seed - 1), data_root).series


def run_year(env: TwinSite, controller: Controller, seed: int) -> YearBill:
    """``controller`` over the whole year of ``env``; its bill, monthly split, largest import and unmet EV energy."""
    result = run_controller(env, controller)
    return YearBill(
        controller=controller.name,
        site_seed=seed,
        bill=tariff_bill(result.flows, env.site_config),
        months=monthly_bill(result.flows, env.site_config),
        max_import_kw=float(result.flows["grid_import_kw"].max()),
        ev_unmet_kwh=float(result.kpis["ev_unmet_kwh"]),
        seconds=result.seconds,
    )


def reference_controllers(
    env: TwinSite, robust: RobustSettings | None, before: SiteSeries | None = None
) -> dict[str, Callable[[], Controller]]:
    """The tariff references of ``env``'s year, built lazily (an LP per year, an MPC per hour), by row name; the
    practitioner's MPC starts the year from ``before``'s last days when given (:func:`year_before`)."""
    series = env.series
    efficiency = float(getattr(env, "charger_efficiency", 1.0))

    def optimum() -> Controller:
        plan = solve_year(series, TARIFF)
        return PlanController(plan.bess_charge_kw - plan.bess_discharge_kw, plan.socket_kw, series.config, name=OPTIMUM)

    def named(controller: Controller, name: str) -> Controller:
        controller.name = name
        return controller

    makers: dict[str, Callable[[], Controller]] = {
        RULE: lambda: RuleBasedController(series.config, charger_efficiency=efficiency),
        "tariff_rule": lambda: TariffRuleController(series, charger_efficiency=efficiency),
        OPTIMUM: optimum,
        f"mpc_perfect_{TARIFF}": lambda: named(MPCController(series, TARIFF, "perfect"), f"mpc_perfect_{TARIFF}"),
        f"mpc_forecast_{TARIFF}": lambda: named(MPCController(series, TARIFF, "forecast"), f"mpc_forecast_{TARIFF}"),
        f"mpc_robust_{TARIFF}": lambda: named(
            RobustMPCController(series, TARIFF, robust, before), f"mpc_robust_{TARIFF}"
        ),
    }
    return makers


def gap_closed(value: float, rule: float, optimum: float) -> float:
    """Share of the rule-to-optimum bill gap a bill closes, in % (0: the rule, 100: the optimum)."""
    return 100.0 * (rule - value) / (rule - optimum) if rule != optimum else 0.0


def gap_ends(env: TwinSite, seed: int) -> tuple[float, float]:
    """The rule-based controller's and the tariff optimum's bills of ``env``'s year: the ends of its gap."""
    makers = reference_controllers(env, None)
    return run_year(env, makers[RULE](), seed).tariff_cost, run_year(env, makers[OPTIMUM](), seed).tariff_cost
