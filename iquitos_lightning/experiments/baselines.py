"""The ``baselines`` command: the reference table of a site (uncontrolled, rule-based, LP optimum).

Why one command: the learned agents are judged against these numbers, so they must be produced
the same way every time: build the site (cached), run each reference through the same CityLearn
environment, solve the perfect-foresight LP on the same data and replay its plan through the
environment, then write ``results/<site>/`` (Markdown, CSV, JSON, two PNG plots).

Rows of the table: ``uncontrolled``, ``rule_based``, ``tariff_rule`` (control/tariff_rule.py),
``optimum`` (the CO2 LP's plan replayed through the simulator: the KPIs that count) and, for each
objective an agent can be trained on (``thesis``, ``tariff``; envs/objectives.py), ``optimum_<objective>``
(that objective's perfect-foresight LP, control/objective_lp.py, replayed) and ``mpc_perfect_<objective>``
/ ``mpc_forecast_<objective>`` (control/mpc.py), with ``mpc_robust_tariff`` for the tariff (control/robust_mpc.py);
last ``optimum_lp`` (the CO2 plan's own flows: what the LP claims). Every row also carries both objectives'
values (``thesis_return``, ``tariff_cost``), and the report gives, per objective, how much of the
rule-based-to-optimum gap each reference closes. The JSON says how far the two CO2 optimum rows differ and
how long each reference took.

``simulator``: ``citylearn`` (the default) or ``twin`` (the bit-equal batched twin, envs/twin_site.py:
the same numbers, about 5 minutes faster per full-year reference at 128 sockets).
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from iquitos_lightning.atomic_files import ensure_writable_folder, write_atomically
from iquitos_lightning.console import command_console
from iquitos_lightning.control.mpc import MPCController
from iquitos_lightning.control.objective_lp import solve_year
from iquitos_lightning.control.optimum import (
    DEFAULT_COST_WEIGHT,
    THROUGHPUT_WEIGHT,
    UNMET_PENALTY,
    OptimumPlan,
    solve_optimum,
)
from iquitos_lightning.control.reference_results import REFERENCES_VERSION
from iquitos_lightning.control.references import (
    Controller,
    PlanController,
    RuleBasedController,
    UncontrolledController,
)
from iquitos_lightning.control.robust_mpc import RobustMPCController, load_settings
from iquitos_lightning.control.rollout import RolloutResult, run_controller
from iquitos_lightning.control.site_years import year_before
from iquitos_lightning.control.tariff_rule import TariffRuleController
from iquitos_lightning.envs.actions import unavoidable_unmet_kwh
from iquitos_lightning.envs.citylearn import make_iquitos_env
from iquitos_lightning.envs.objectives import OBJECTIVES, TARIFF, THESIS, tariff_bill
from iquitos_lightning.envs.twin import make_twin
from iquitos_lightning.envs.twin_site import TwinSite
from iquitos_lightning.metrics.kpis import DEPARTURE_SOC_TOLERANCE, compute_kpis
from iquitos_lightning.report.plots import plot_dispatch_week, plot_monthly_energy
from iquitos_lightning.report.provenance import git_revision
from iquitos_lightning.report.results_page import write_results_page
from iquitos_lightning.report.tables import kpi_table, to_markdown, to_rich
from iquitos_lightning.site.build import BuildResult, build_site
from iquitos_lightning.site.config import SiteConfig, load_site_config

# KPIs compared between the LP's claim and its replay in CityLearn (relative difference in the JSON).
_REPLAY_CHECKED_KPIS = ("grid_import_kwh", "co2_kg", "cost", "ev_energy_served_kwh", "ev_unmet_kwh")

SIMULATORS = ("citylearn", "twin")


def run_baselines(
    site_path: Path,
    results_root: Path,
    *,
    console: Console | None = None,
    simulator: str = "citylearn",
    objectives: tuple[str, ...] = OBJECTIVES,
    command: list[str] | None = None,
) -> pd.DataFrame:
    """Build the site, run every reference, write ``results_root/<site>/`` and return the KPI table.

    ``command``: the arguments that asked for it (recorded in ``baselines.md``; default: this call's equivalent).
    """
    made_by = "python -m iquitos_lightning " + " ".join(
        command or ["baselines", "--site", str(site_path), "--simulator", simulator, "--results", str(results_root)]
    )
    if simulator not in SIMULATORS:
        raise ValueError(f"simulator must be one of {SIMULATORS}, got {simulator!r}")
    console = console or command_console()
    site_config = load_site_config(site_path)
    ensure_writable_folder(Path(results_root) / site_config.name, "report")  # fail now, not after the LP
    build = build_site(site_config, progress=True)
    if simulator == "twin":
        env = TwinSite(make_twin(site_config, data_root=build.path.parent, record=True))
    else:
        env = make_iquitos_env(site_config, data_root=build.path.parent)
    charger_efficiency = float(getattr(env, "charger_efficiency", 1.0))

    console.print(f"[bold]Solving[/] the perfect-foresight LP ({site_config.hours} h) with HiGHS ...")
    plan = solve_optimum(env.series, charger_efficiency=charger_efficiency)
    console.print(
        f"LP: {plan.variables:,} variables, {plan.constraints:,} constraints, solved in {plan.solve_seconds:.2f} s; "
        f"CO2 {plan.co2_kg:,.0f} kg"
    )

    controllers: list[Controller] = [
        UncontrolledController(site_config),
        RuleBasedController(site_config, charger_efficiency=charger_efficiency),
        TariffRuleController(env.series, charger_efficiency=charger_efficiency),
        PlanController(plan.bess_charge_kw - plan.bess_discharge_kw, plan.socket_kw, env.site_config, name="optimum"),
    ]
    lp_seconds = {"optimum": plan.solve_seconds}
    for objective in objectives:
        year = solve_year(env.series, objective)
        console.print(f"LP of the {objective} objective: {year.variables:,} variables, {year.solve_seconds:.1f} s")
        name = f"optimum_{objective}"
        lp_seconds[name] = year.solve_seconds
        controllers.append(
            PlanController(year.bess_charge_kw - year.bess_discharge_kw, year.socket_kw, site_config, name=name)
        )
        for forecast in ("perfect", "forecast"):
            mpc = MPCController(env.series, objective, forecast)
            mpc.name = f"mpc_{forecast}_{objective}"
            controllers.append(mpc)
        if objective == TARIFF:  # the practitioner's hedged MPC, with its knobs tuned on training years
            before = year_before(site_config, build.path.parent)
            robust = RobustMPCController(env.series, objective, load_settings(), before)
            robust.name = f"mpc_robust_{objective}"
            controllers.append(robust)
    rollouts = _run_all(env, controllers, console)

    lp_kpis = compute_kpis(plan.flows(env.series), plan.departures(env.series), site_config)
    kpis = {result.controller: result.kpis for result in rollouts}
    table = kpi_table(
        {**kpis, "optimum_lp": {**lp_kpis, **_objective_values(plan.flows(env.series), None, site_config)}}
    )

    out_dir = Path(results_root) / site_config.name
    unavoidable_kwh = unavoidable_unmet_kwh(env.series)
    _write_outputs(
        out_dir, site_config, table, rollouts, plan, lp_kpis, build, unavoidable_kwh, simulator, lp_seconds,
        controllers, made_by,
    )  # fmt: skip
    write_results_page(out_dir)
    console.print(
        to_rich(table, title=f"Reference controllers, site {site_config.name}", currency=_currency(site_config))
    )
    _warn_if_evs_underserved(table, unavoidable_kwh, console)
    console.print(f"Wrote {out_dir}/ (baselines.md, .csv, .json, dispatch_week.png, monthly_energy.png, README.md)")
    return table


def _run_all(env: Any, controllers: list[Controller], console: Console) -> list[RolloutResult]:
    """Each controller through the same environment, with one progress bar over its steps."""
    results = []
    columns = (
        TextColumn("{task.description:<14}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("steps"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console) as progress:
        for controller in controllers:
            task = progress.add_task(controller.name, total=env.series.hours)
            result = run_controller(env, controller, on_step=lambda task=task: progress.advance(task))
            progress.update(task, completed=env.series.hours)
            result.kpis.update(_objective_values(result.flows, env.objective_returns(), env.site_config))
            results.append(result)
    return results


def _objective_values(flows: pd.DataFrame, returns: dict[str, float] | None, site_config: SiteConfig) -> dict:
    """Both objectives' values of a run: the seed reward's return and the tariff bill (with its demand charge)."""
    bill = tariff_bill(flows, site_config)
    values = {"demand_charge": bill["demand_charge"], "tariff_cost": bill["tariff_cost"]}
    values["thesis_return"] = float("nan") if returns is None else float(returns[THESIS])
    return values


def objective_gaps(table: pd.DataFrame, objective: str) -> pd.DataFrame:
    """Per reference: its value on ``objective`` and the share of the rule-based-to-optimum gap it closes."""
    column, better = ("thesis_return", 1.0) if objective == THESIS else ("tariff_cost", -1.0)
    rows = [name for name in table.index if name != "optimum_lp"]
    values = table.loc[rows, column].astype(float)
    rule, best = values["rule_based"], values[f"optimum_{objective}"]
    gap = (values - rule) / (best - rule) * 100.0 if best != rule else values * 0.0
    result = pd.DataFrame(
        {column: values, "gap_closed_pct": gap, "vs_optimum_pct": better * (values - best) / abs(best) * 100}
    )
    result.index.name = "controller"
    return result


def _write_outputs(
    out_dir: Path,
    site_config: SiteConfig,
    table: pd.DataFrame,
    rollouts: list[RolloutResult],
    plan: OptimumPlan,
    lp_kpis: dict[str, float],
    build: BuildResult,
    unavoidable_kwh: float,
    simulator: str = "citylearn",
    lp_seconds: dict[str, float] | None = None,
    controllers: list[Controller] | None = None,
    command: str = "python -m iquitos_lightning baselines",
) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    currency = _currency(site_config)
    replayed = next(result.kpis for result in rollouts if result.controller == "optimum")
    summary = {
        "site": site_config.name,
        "site_config_hash": site_config.content_hash(),
        "references_version": REFERENCES_VERSION,
        "mpc_robust_settings": asdict(load_settings()),  # the tuned knobs its mpc_robust row ran with
        "dataset": str(build.path),
        "hours": site_config.hours,
        "currency": currency,
        "kpis": table.to_dict(orient="index"),
        "optimum_lp": {
            "objective": plan.objective,
            "co2_kg": plan.co2_kg,
            "cost": plan.cost,
            "solve_seconds": plan.solve_seconds,
            "variables": plan.variables,
            "constraints": plan.constraints,
            "replay_vs_lp": {
                kpi: {
                    "lp": lp_kpis[kpi],
                    "replayed": replayed[kpi],
                    "relative_difference": _relative_difference(replayed[kpi], lp_kpis[kpi]),
                }
                for kpi in _REPLAY_CHECKED_KPIS
            },
        },
        "ev_unmet_unavoidable_kwh": unavoidable_kwh,
        "simulator": simulator,
        "command": command,
        "git_revision": git_revision(),
        "runs": {
            result.controller: {
                "steps": result.steps,
                "seconds": result.seconds + (lp_seconds or {}).get(result.controller, 0.0),
                "lp_seconds": (lp_seconds or {}).get(result.controller, 0.0)
                + sum(getattr(c, "solve_seconds", 0.0) for c in controllers or [] if c.name == result.controller),
            }
            for result in rollouts
        },
        "objectives": {
            objective: objective_gaps(table, objective).to_dict(orient="index")
            for objective in OBJECTIVES
            if f"optimum_{objective}" in table.index
        },
        "definitions": {
            "departure_soc_tolerance": DEPARTURE_SOC_TOLERANCE,
            "bess_equivalent_full_cycles": "BESS energy discharged (grid side) / (capacity x (soc_max - soc_min))",
            "pv_self_consumption_pct": "PV generation minus export/curtailment, over PV generation",
            "ev_energy_served_kwh": "battery-side energy delivered to departed EVs",
            "optimum": "the LP plan replayed through CityLearn as actions",
            "optimum_lp": "the LP plan's own flows (what the LP claims)",
        },
        "machine": platform.platform(),
    }
    # Atomic writes: a full or read-only disk fails with one clear error and keeps the previous reports.
    write_atomically(
        json.dumps(summary, indent=2, sort_keys=False).encode() + b"\n", out_dir / "baselines.json", "report"
    )
    write_atomically(table.to_csv(float_format="%.6g").encode(), out_dir / "baselines.csv", "report")
    write_atomically(_markdown_report(site_config, table, plan, summary).encode(), out_dir / "baselines.md", "report")

    flows = {result.controller: result.flows for result in rollouts}
    year = site_config.calendar.year
    plot_dispatch_week(flows, out_dir / "dispatch_week.png", year=year, title=site_config.name)
    plot_monthly_energy(flows, out_dir / "monthly_energy.png", year=year, title=site_config.name)


def _markdown_report(site_config: SiteConfig, table: pd.DataFrame, plan: OptimumPlan, summary: dict) -> str:
    comparison = summary["optimum_lp"]["replay_vs_lp"]
    difference_text = "; ".join(
        f"{kpi} {entry['replayed']:,.2f} vs {entry['lp']:,.2f} ({100 * entry['relative_difference']:+.3f} %)"
        for kpi, entry in comparison.items()
    )
    return (
        f"# Reference controllers: site `{site_config.name}`\n\n"
        f"Made by `{summary['command']}` at git revision `{summary['git_revision']}`.\n\n"
        f"{site_config.hours:,} hourly steps, site config hash `{summary['site_config_hash']}`.\n\n"
        f"{to_markdown(table, currency=summary['currency'])}\n"
        "- `uncontrolled`: every connected socket at full power, BESS idle.\n"
        "- `rule_based`: PV surplus to EVs then BESS, BESS covers net load in the peak window, EVs just in time.\n"
        "- `tariff_rule`: rule-based plus a night BESS charge up to the room left for the forecast PV surplus "
        "and a flat import over the peak window (control/tariff_rule.py).\n"
        "- `optimum`: the perfect-foresight CO2 LP's plan replayed through the simulator (these KPIs count).\n"
        "- `optimum_<objective>`: the perfect-foresight LP of that objective, replayed; `mpc_perfect_<objective>` / "
        "`mpc_forecast_<objective>`: a 24 h LP of that objective re-solved every hour with true / "
        "previous-days forecasts (control/mpc.py); `mpc_robust_tariff`: the same LP planned at the past days' "
        "highest mall load and lowest PV plus a margin, yesterday's EV arrivals planned too, its knobs tuned on "
        "training years (control/robust_mpc.py, configs/tuned/mpc_robust_tariff.yaml).\n"
        "- `optimum_lp`: the CO2 plan's own flows, as the LP computed them.\n\n"
        f"Simulator: {summary['simulator']}. Every EV is served by the EV guarantee (envs/actions.py) in every row.\n\n"
        + _objective_sections(summary)
        + f"LP: {plan.variables:,} variables, {plan.constraints:,} equality constraints, solved by HiGHS in "
        f"{plan.solve_seconds:.2f} s; objective {plan.objective:,.1f} = CO2 kg + {DEFAULT_COST_WEIGHT:g} x cost "
        f"+ {UNMET_PENALTY:g} x unmet EV kWh + {THROUGHPUT_WEIGHT:g} x BESS throughput kWh. "
        f"Replayed through the simulator vs the LP's claim: {difference_text}.\n\n"
        f"EV energy no controller can deliver (need beyond charger kW x dwell): "
        f"{summary['ev_unmet_unavoidable_kwh']:,.2f} kWh; a controller serves EVs fully when its unmet equals it.\n\n"
        f"Departures count as below required SOC when short by more than {DEPARTURE_SOC_TOLERANCE:g} of the "
        "battery. BESS equivalent full cycles = energy discharged / usable capacity. Avoided tailpipe CO2 is "
        "reported apart and never rewarded.\n"
    )


def _objective_sections(summary: dict) -> str:
    """One small table per objective: each reference's value, gap closed from rule-based to the optimum, run time."""
    text = ""
    for objective, rows in summary.get("objectives", {}).items():
        column = "thesis_return" if objective == THESIS else "tariff_cost"
        unit = (
            "return (higher is better)" if objective == THESIS else f"{summary['currency']} per year (lower is better)"
        )
        text += f"### Objective `{objective}`: {column}, {unit}\n\n"
        text += "| controller | value | gap closed [%] | vs optimum [%] | run time [s] |\n|:---|---:|---:|---:|---:|\n"
        for name, row in rows.items():
            seconds = summary["runs"].get(name, {}).get("seconds", float("nan"))
            cells = f"{row[column]:,.2f} | {row['gap_closed_pct']:.1f} | {row['vs_optimum_pct']:+.2f} | {seconds:,.0f}"
            text += f"| {name} | {cells} |\n"
        text += "\n"
    return text


def _warn_if_evs_underserved(table: pd.DataFrame, unavoidable_kwh: float, console: Console) -> None:
    """Say loudly when a reference leaves EV energy unserved that some controller could have delivered."""
    tolerance_kwh = 1e-3 * max(1.0, float(table["ev_energy_served_kwh"].max()))
    for controller, unmet in table["ev_unmet_kwh"].items():
        if unmet > unavoidable_kwh + tolerance_kwh:
            console.print(
                f"[bold red]warning[/]: {controller} leaves {unmet - unavoidable_kwh:,.2f} kWh "
                "of avoidable EV need unmet"
            )


def _relative_difference(replayed: float, claimed: float) -> float:
    """(replayed - claimed) / claimed; 0 when both are (near) zero, as for unmet energy."""
    if abs(replayed - claimed) < 1e-6:
        return 0.0
    return (replayed - claimed) / max(abs(claimed), 1e-6)


def _currency(site_config: SiteConfig) -> str:
    return site_config.grid.currency
