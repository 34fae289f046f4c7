"""The ``test-years`` command: every reference and every trained agent on site years nobody designed on, read once.

Why: 2026 (the site's own seed) is the project's development year: every layout, rate, budget and selection rule was
chosen by reading its row, so its figures flatter whatever was chosen. The table a reviewer accepts evaluates every
row on years that no choice ever read: :data:`TEST_YEARS` (site seeds of the same profile, drawn afresh), after the
agents are trained (on 2030-2033), chosen (on 2034) and the practitioner's MPC tuned (on 2030-2033).

What it does, on the twin (bit-equal to CityLearn, tests/envs/test_twin.py):
- the tariff references of each test year (control/site_years.py: rule-based, tariff rule, the year's optimum, MPC
  with perfect forecasts, the tuned practitioner's MPC, the certainty-equivalent MPC), cached per year under
  ``runs/test-years/`` (a rerun only evaluates what is new);
- each finished ``compare`` run's ``best.ckpt`` (its policy chosen on the selection year) on each test year, one
  deterministic episode;
- per row: gap closed (mean ± std over test years x seeds), bill, energy and demand charge, the largest hourly
  import, unmet EV energy, and the month whose bill exceeds the optimum's most; the regret ladder figure and the
  per-month energy / demand-charge table.

Writes ``results/<site>/test_years_tariff.md|csv|json``, ``regret_ladder_tariff.png`` and
``monthly_bill_tariff.csv``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from iquitos_lightning.atomic_files import write_atomically
from iquitos_lightning.console import command_console
from iquitos_lightning.control.robust_mpc import TUNED_SETTINGS, load_settings
from iquitos_lightning.control.site_years import (
    LADDER,
    OPTIMUM,
    RULE,
    gap_closed,
    reference_controllers,
    run_year,
    year_before,
    year_env,
)
from iquitos_lightning.envs.objectives import TARIFF, monthly_bill, tariff_bill
from iquitos_lightning.errors import ConfigError
from iquitos_lightning.metrics.kpis import compute_kpis
from iquitos_lightning.report.loss_split import hours_known_first, loss_split_markdown
from iquitos_lightning.report.provenance import git_revision
from iquitos_lightning.report.regret_ladder import plot_regret_ladder
from iquitos_lightning.report.results_page import write_results_page
from iquitos_lightning.site.config import load_site_config

TEST_YEARS = (2040, 2041, 2042, 2043, 2044)  # site seeds read only for the committed tables
REFERENCES_VERSION = 2  # bumped when a reference changes what it does: cached years are evaluated again


def year_row(bill: dict[str, float], months: pd.DataFrame, max_import_kw: float, unmet_kwh: float) -> dict[str, Any]:
    """One controller on one year, as the cache and the tables hold it."""
    return {
        "tariff_cost": float(bill["tariff_cost"]),
        "demand_charge": float(bill["demand_charge"]),
        "energy_and_co2": float(bill["tariff_cost"] - bill["demand_charge"]),
        "max_import_kw": float(max_import_kw),
        "ev_unmet_kwh": float(unmet_kwh),
        "months": {
            column: [float(value) for value in months[column]] for column in ("energy", "co2_term", "demand_charge")
        },
    }


def references_of_year(site: Path, seed: int, cache: Path, console: Console | None) -> dict[str, dict[str, Any]]:
    """Every tariff reference on year ``seed`` (cached in ``cache`` by site config, references version and the tuned
    MPC's knobs)."""
    robust = load_settings(TUNED_SETTINGS)
    site_config = load_site_config(site)
    key = f"{site_config.content_hash()}-{REFERENCES_VERSION}-{json.dumps(asdict(robust), sort_keys=True)}"
    path = cache / f"references-{seed}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"
    if path.is_file():
        return json.loads(path.read_text())
    env = year_env(site, seed)
    rows = {}
    for name, make in reference_controllers(env, robust, year_before(env.site_config)).items():
        bill = run_year(env, make(), seed)
        rows[name] = year_row(bill.bill, bill.months, bill.max_import_kw, bill.ev_unmet_kwh)
        (console or command_console()).print(f"year {seed}: {name} {bill.tariff_cost:,.0f} ({bill.seconds:.0f} s)")
    cache.mkdir(parents=True, exist_ok=True)
    write_atomically((json.dumps(rows) + "\n").encode(), path, "test-year references")
    return rows


def agent_class(run_dir: Path) -> type:
    """The LightningModule class a ``compare`` run trained (its saved ``config.yaml``'s ``model.class_path``)."""
    configs = sorted(run_dir.glob("version_*/config.yaml"))
    if not configs:
        raise ConfigError(f"{run_dir}: no version_*/config.yaml (not a finished compare run)")
    class_path = yaml.safe_load(configs[-1].read_text())["model"]["class_path"]
    module, _, name = class_path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def agent_on_years(run_dir: Path, years: tuple[int, ...]) -> dict[int, dict[str, Any]]:
    """The run's ``best.ckpt`` (chosen on the selection year) on each test year: one deterministic episode each."""
    from iquitos_lightning.agents.site_envs import make_agent_year_env  # lazy: torch only for agent rows
    from iquitos_lightning.envs.factory import site_env  # lazy: as above
    from iquitos_lightning.training.quiet import plain_torchrl_lines

    plain_torchrl_lines()  # TorchRL's lines without colour codes in a log file, as `fit` prints them
    checkpoint = run_dir / "checkpoints" / "best.ckpt"
    if not checkpoint.is_file():
        raise ConfigError(f"{run_dir}: no checkpoints/best.ckpt (a run with a selection year writes it)")
    agent = agent_class(run_dir).load_from_checkpoint(checkpoint, map_location="cpu")
    agent.eval()
    rows = {}
    for seed in years:
        env = make_agent_year_env(agent.env_config, seed)
        agent.evaluate_episode(0, env)
        site = site_env(env)
        flows = site.flows()
        kpis = compute_kpis(flows, site.departures(), site.site_config)
        bill = tariff_bill(flows, site.site_config)
        months = monthly_bill(flows, site.site_config)
        rows[seed] = year_row(bill, months, float(flows["grid_import_kw"].max()), float(kpis["ev_unmet_kwh"]))
        rows[seed]["frames_trained"] = int(agent.frames_done)
        env.close()
    return rows


def month_bills(row: dict[str, Any]) -> np.ndarray:
    """[months] a cached row's bill per month (energy + CO2 term + demand charge)."""
    return sum(np.asarray(row["months"][part]) for part in ("energy", "co2_term", "demand_charge"))


def cached_agent_rows(run: Path, years: tuple[int, ...], cache: Path) -> dict[int, dict[str, Any]]:
    """:func:`agent_on_years` of ``run``, kept under ``cache`` by the checkpoint's size and time and the years: a
    rerun of ``test-years`` evaluates only runs whose ``best.ckpt`` is new."""
    stat = (run / "checkpoints" / "best.ckpt").stat()
    key = f"{run.resolve()}-{stat.st_size}-{stat.st_mtime_ns}-{years}-{REFERENCES_VERSION}"
    path = cache / f"agent-{run.name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"
    if path.is_file():
        return {int(year): row for year, row in json.loads(path.read_text()).items()}
    rows = agent_on_years(run, years)
    cache.mkdir(parents=True, exist_ok=True)
    write_atomically((json.dumps(rows) + "\n").encode(), path, "test-year agent rows")
    return rows


def summary_table(
    references: dict[int, dict[str, dict[str, Any]]], agents: dict[str, dict[int, dict[int, dict[str, Any]]]]
) -> pd.DataFrame:
    """One row per reference and agent: gap closed mean ± std over test years (x seeds), bill parts, largest import,
    unmet EV energy, worst month against the optimum."""
    years = sorted(references)
    samples: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for seed in years:
        for name, row in references[seed].items():
            samples.setdefault(name, []).append((seed, row))
    for agent, runs in agents.items():
        for run in runs.values():
            for seed, row in run.items():
                samples.setdefault(agent, []).append((seed, row))
    records = {}
    for name, rows in samples.items():
        gaps = [
            gap_closed(
                row["tariff_cost"], references[seed][RULE]["tariff_cost"], references[seed][OPTIMUM]["tariff_cost"]
            )
            for seed, row in rows
        ]
        regret = np.mean([month_bills(row) - month_bills(references[seed][OPTIMUM]) for seed, row in rows], axis=0)
        records[name] = {
            "gap_closed_pct": float(np.mean(gaps)),
            "gap_std": float(np.std(gaps, ddof=1)) if len(gaps) > 1 else 0.0,
            "gap_min": float(np.min(gaps)),
            "samples": len(gaps),
            "bill": float(np.mean([row["tariff_cost"] for _, row in rows])),
            "energy_and_co2": float(np.mean([row["energy_and_co2"] for _, row in rows])),
            "demand_charge": float(np.mean([row["demand_charge"] for _, row in rows])),
            "max_import_kw": float(np.max([row["max_import_kw"] for _, row in rows])),
            "ev_unmet_kwh": float(np.mean([row["ev_unmet_kwh"] for _, row in rows])),
            "worst_month": int(np.argmax(regret)) + 1,
            "worst_month_regret": float(np.max(regret)),
        }
    table = pd.DataFrame.from_dict(records, orient="index")
    table.index.name = "row"
    return table.sort_values("gap_closed_pct", ascending=False)


def monthly_table(
    references: dict[int, dict[str, dict[str, Any]]], agents: dict[str, dict[int, dict[int, dict[str, Any]]]]
) -> pd.DataFrame:
    """Per row and month: energy (with the CO2 term) and demand charge, means over test years (x seeds)."""
    parts: dict[str, list[dict[str, Any]]] = {}
    for rows in references.values():
        for name, row in rows.items():
            parts.setdefault(name, []).append(row)
    for agent, runs in agents.items():
        for run in runs.values():
            parts.setdefault(agent, []).extend(run.values())
    frames = []
    for name, rows in parts.items():
        energy = np.mean([np.add(row["months"]["energy"], row["months"]["co2_term"]) for row in rows], axis=0)
        demand = np.mean([row["months"]["demand_charge"] for row in rows], axis=0)
        months = np.arange(1, len(energy) + 1)
        frames.append(pd.DataFrame({"row": name, "month": months, "energy_and_co2": energy, "demand_charge": demand}))
    return pd.concat(frames, ignore_index=True)


def finished_runs(runs_root: Path, site: str, agents: list[str]) -> dict[str, list[Path]]:
    """Per agent, the ``compare`` runs under ``runs_root/<site>/tariff/`` whose final test ran (budget done)."""
    found: dict[str, list[Path]] = {}
    for agent in agents:
        runs = sorted(
            (runs_root / site / TARIFF).glob(f"{agent}-seed*"), key=lambda p: int(p.name.rsplit("seed", 1)[1])
        )
        done = [run for run in runs if any(run.glob("report/test-*/kpis.json"))]
        found[agent] = done
    return found


def run_test_years(
    site: Path,
    agents: list[str],
    years: tuple[int, ...],
    runs_root: Path,
    results: Path,
    command: list[str],
    console: Console | None = None,
    cache_root: Path = Path("runs/test-years"),
    revision: str | None = None,
) -> Path:
    """The whole command (module docstring); returns ``results/<site>/``. ``revision``: the code's git revision as
    the calling command read it at its start (``compare`` writes its own pages first); read here when not given."""
    console = console or command_console()
    revision = revision or git_revision()
    site_config = load_site_config(site)
    if site_config.seed in years or not years:
        raise ConfigError(f"--years must list test years other than the site's own {site_config.seed}")
    overlap = sorted(set(years) & {2030, 2031, 2032, 2033, 2034})
    if overlap:
        raise ConfigError(
            f"--years {overlap}: the card's training (2030-2033) and selection (2034) years are not test years"
        )
    cache = cache_root / site_config.name
    references = {}
    for seed in years:
        references[seed] = references_of_year(site, seed, cache, console)
    runs = finished_runs(runs_root, site_config.name, agents)
    agent_rows: dict[str, dict[int, dict[int, dict[str, Any]]]] = {}
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("agents on test years", total=sum(len(found) for found in runs.values()))
        for agent, found in runs.items():
            for run in found:
                seed = int(run.name.rsplit("seed", 1)[1])
                agent_rows.setdefault(agent, {})[seed] = cached_agent_rows(run, years, cache)
                progress.advance(task)
    table = summary_table(references, agent_rows)
    monthly = monthly_table(references, agent_rows)
    out = results / site_config.name
    out.mkdir(parents=True, exist_ok=True)
    settings = load_settings(TUNED_SETTINGS)
    metadata = {
        "command": "python -m iquitos_lightning " + " ".join(command),
        "git_revision": revision,
        "test_years": list(years),
        "agent_runs": {agent: [str(run) for run in found] for agent, found in runs.items()},
        "mpc_robust_settings": asdict(settings),
        "simulator": "twin",
    }
    summary = {**metadata, "table": json.loads(table.to_json(orient="index")), "references": references}
    summary["agents"] = agent_rows
    write_atomically((json.dumps(summary, indent=1) + "\n").encode(), out / "test_years_tariff.json", "report")
    write_atomically(table.to_csv(float_format="%.6g").encode(), out / "test_years_tariff.csv", "report")
    write_atomically(
        monthly.to_csv(index=False, float_format="%.6g").encode(), out / "monthly_bill_tariff.csv", "report"
    )
    ladder_agents = hours_known_first(list(agent_rows))
    plot_regret_ladder(table, monthly, out / "regret_ladder_tariff.png", rungs=LADDER, agents=ladder_agents)
    write_atomically(
        _markdown(table, monthly, metadata, settings.describe()).encode(), out / "test_years_tariff.md", "report"
    )
    write_results_page(out)
    console.print(_markdown(table, monthly, metadata, settings.describe()), markup=False, soft_wrap=True)
    return out


def _markdown(table: pd.DataFrame, monthly: pd.DataFrame, metadata: dict[str, Any], robust: str) -> str:
    runs = metadata["agent_runs"]
    lines = [
        "# Every row on test years: site seeds read once, tariff objective",
        "",
        f"Made by `{metadata['command']}` at git revision `{metadata['git_revision']}`, on the twin. Test years "
        f"(site seeds): {metadata['test_years']}; no layout, rate, budget, selection rule or MPC knob was chosen by "
        "reading them. Agents: each `compare` run's `best.ckpt` (trained on 2030-2033, chosen on 2034), "
        + (", ".join(f"{agent} {len(found)} seeds" for agent, found in runs.items()) or "none")
        + f". `mpc_robust_tariff`: {robust} (tuned on training years: `tune_mpc_robust_tariff.md`; "
        "`configs/tuned/mpc_robust_tariff.yaml` names the command).",
        "",
        "| row | gap closed [%] mean ± std (min) | n | bill [PEN] | energy + CO2 [PEN] | demand charge [PEN] | "
        "largest import [kW] | EV unmet [kWh] | worst month (regret [PEN]) |",
        "|:---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in table.iterrows():
        lines.append(
            f"| {name} | {row['gap_closed_pct']:.1f} ± {row['gap_std']:.1f} ({row['gap_min']:.1f}) | "
            f"{int(row['samples'])} | {row['bill']:,.0f} | {row['energy_and_co2']:,.0f} | "
            f"{row['demand_charge']:,.0f} | "
            f"{row['max_import_kw']:,.0f} | {row['ev_unmet_kwh']:,.1f} | {int(row['worst_month'])} "
            f"({row['worst_month_regret']:,.0f}) |"
        )
    lines += [
        "",
        "Gap closed = (rule-based bill - row's bill) / (rule-based bill - optimum's bill) on each test year; "
        "agents over test years x seeds. The ladder's rungs: `optimum_tariff` (the year's LP, perfect foresight) -> "
        "`mpc_perfect_tariff` (what a 24 h horizon loses) -> `mpc_robust_tariff` / `mpc_forecast_tariff` (what "
        "past-days forecasts lose, hedged or not) -> the agents (an `<agent>+oracle` row: the same agent with the true "
        "coming hours in its observation, the rung between `mpc_perfect_tariff` and the agent). Worst month: the "
        "month whose bill exceeds the optimum's most (mean over years).",
        "",
        *loss_split_markdown(table, list(runs), OPTIMUM, f"mpc_perfect_{TARIFF}"),
        "![regret ladder](regret_ladder_tariff.png)",
        "",
        "Per month (mean over test years), energy + CO2 / demand charge [PEN thousand]:",
        "",
    ]
    pivot_energy = monthly.pivot(index="row", columns="month", values="energy_and_co2") / 1e3
    pivot_demand = monthly.pivot(index="row", columns="month", values="demand_charge") / 1e3
    months = list(pivot_energy.columns)
    lines.append("| row | " + " | ".join(str(month) for month in months) + " |")
    lines.append("|:---|" + "---:|" * len(months))
    for name in table.index:
        cells = [f"{pivot_energy.loc[name, m]:,.0f} / {pivot_demand.loc[name, m]:,.0f}" for m in months]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    if any(not math.isfinite(value) for value in table["gap_closed_pct"]):
        lines.append("**A row has no finite gap: a year's rule and optimum bills are equal.**")
    return "\n".join(lines) + "\n"
