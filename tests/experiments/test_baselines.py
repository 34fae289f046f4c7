"""The ``baselines`` command end to end on the tiny site: table, files, and what they say."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from iquitos_lightning.experiments.baselines import run_baselines

TINY_SITE = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"


def test_baselines_write_table_summary_and_plots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the site builds under ./data
    output = io.StringIO()
    table = run_baselines(TINY_SITE, tmp_path / "results", console=Console(file=output, width=140))

    assert list(table.index)[:4] == ["uncontrolled", "rule_based", "tariff_rule", "optimum"]
    assert list(table.index)[-1] == "optimum_lp" and "mpc_forecast_tariff" in table.index
    out_dir = tmp_path / "results" / "tiny"
    for name in ("baselines.md", "baselines.csv", "baselines.json", "dispatch_week.png", "monthly_energy.png"):
        assert (out_dir / name).stat().st_size > 0, name

    summary = json.loads((out_dir / "baselines.json").read_text())
    assert summary["hours"] == 168
    assert summary["kpis"]["optimum"]["co2_kg"] == pytest.approx(table.loc["optimum", "co2_kg"])
    for entry in summary["optimum_lp"]["replay_vs_lp"].values():
        assert abs(entry["relative_difference"]) < 1e-3
    assert summary["runs"]["uncontrolled"]["steps"] == 168

    markdown = (out_dir / "baselines.md").read_text()
    assert "| rule_based |" in markdown and "co2 [kg]" in markdown
    assert "Reference controllers, site tiny" in output.getvalue()
    assert "warning" not in output.getvalue()  # no reference left avoidable EV need unmet
    assert "mpc_robust_tariff" in table.index  # the practitioner's MPC is a reference row
    made_by = f"python -m iquitos_lightning baselines --site {TINY_SITE} --simulator citylearn"
    assert summary["command"].startswith(made_by) and f"Made by `{made_by}" in markdown
    page = (out_dir / "README.md").read_text()  # the site's results page names the command that made the table
    assert f"Made by `{made_by}" in page and "[baselines.md](baselines.md)" in page
