"""The shared KPI table: column order, labels, number formats, Markdown and terminal output."""

from __future__ import annotations

import io

from rich.console import Console

from iquitos_lightning.metrics.kpis import KPI_UNITS
from iquitos_lightning.report.tables import column_label, format_value, kpi_table, to_markdown, to_rich


def _kpis(co2: float) -> dict[str, float]:
    values = dict.fromkeys(KPI_UNITS, 0.0)
    values.update(co2_kg=co2, grid_import_kwh=co2 / 0.4521, pv_self_consumption_pct=87.654)
    return values


def test_table_has_one_row_per_controller_and_kpi_columns_in_standard_order() -> None:
    table = kpi_table({"uncontrolled": {**_kpis(300.0), "extra_metric": 1.0}, "optimum": _kpis(100.0)})

    assert list(table.index) == ["uncontrolled", "optimum"]
    assert list(table.columns) == [*KPI_UNITS, "extra_metric"]
    assert table.loc["optimum", "co2_kg"] == 100.0


def test_labels_and_formats_carry_units() -> None:
    assert column_label("co2_kg") == "co2 [kg]"
    assert column_label("cost", currency="PEN") == "cost [PEN]"
    assert column_label("pv_self_consumption_pct") == "pv_self_consumption [%]"
    assert format_value("grid_import_kwh", 1234567.4) == "1,234,567"
    assert format_value("bess_equivalent_full_cycles", 91.379) == "91.38"
    assert format_value("energy_balance_max_error_kw", 3.2e-12) == "3.2e-12"


def test_markdown_table_is_well_formed() -> None:
    markdown = to_markdown(kpi_table({"uncontrolled": _kpis(300.0), "optimum": _kpis(100.0)}))
    lines = markdown.strip().splitlines()

    assert len(lines) == 4
    assert lines[0].startswith("| controller | grid_import [kWh] | co2 [kg] |")
    assert all(line.count("|") == len(KPI_UNITS) + 2 for line in lines)
    assert "| optimum | 221 | 100 |" in lines[3]


def test_terminal_table_shows_units_in_brackets() -> None:
    """Rich would swallow '[kWh]' as markup if the labels were not escaped."""
    buffer = io.StringIO()
    Console(file=buffer, width=120).print(to_rich(kpi_table({"rule_based": _kpis(200.0)}), title="t"))
    output = buffer.getvalue()

    assert "grid_import [kWh]" in output
    assert "87.7" in output
