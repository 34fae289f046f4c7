"""The KPI comparison table: one row per controller, one column per KPI, in every output format.

Why shared: the reference baselines and the learned agents' comparison print the same table, so
a reader compares rows across reports without re-learning the columns. Column order and units
come from :data:`~iquitos_lightning.metrics.kpis.KPI_UNITS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd
from rich.markup import escape
from rich.table import Table

from iquitos_lightning.metrics.kpis import KPI_UNITS

# Decimals shown per unit: energy to the kWh, shares and cycles with more detail.
_DECIMALS = {"kWh": 0, "kg": 0, "currency": 0, "kW": 1, "%": 1, "count": 0, "cycles": 2}


def kpi_table(kpis_by_controller: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """A DataFrame indexed by controller, KPI columns in the standard order (unknown KPIs appended)."""
    table = pd.DataFrame.from_dict({name: dict(kpis) for name, kpis in kpis_by_controller.items()}, orient="index")
    known = [column for column in KPI_UNITS if column in table.columns]
    extra = [column for column in table.columns if column not in KPI_UNITS]
    table = table[known + extra]
    table.index.name = "controller"
    return table


def column_label(kpi: str, currency: str = "PEN") -> str:
    """Header text for a KPI column: its name and unit, e.g. ``co2_kg`` -> ``co2 [kg]``."""
    unit = KPI_UNITS.get(kpi, "")
    unit = currency if unit == "currency" else unit
    name = kpi
    for suffix in ("_kwh", "_kg", "_kw", "_pct"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return f"{name} [{unit}]" if unit else name


def format_value(kpi: str, value: float) -> str:
    """A KPI value as the table shows it (thousands separated, decimals by unit)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if kpi == "energy_balance_max_error_kw":
        return f"{value:.1e}"
    decimals = _DECIMALS.get(KPI_UNITS.get(kpi, ""), 3)
    return f"{value:,.{decimals}f}"


def to_markdown(table: pd.DataFrame, currency: str = "PEN") -> str:
    """The table as GitHub Markdown, numbers right-aligned."""
    headers = ["controller", *(column_label(column, currency) for column in table.columns)]
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join([":---", *["---:"] * len(table.columns)]) + "|",
    ]
    for controller, row in table.iterrows():
        cells = [str(controller), *(format_value(column, row[column]) for column in table.columns)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_rich(table: pd.DataFrame, title: str, currency: str = "PEN") -> Table:
    """The table for the terminal (rich), transposed: one row per KPI, one column per controller.

    Transposed because a dozen KPI columns do not fit a terminal, while three or four controllers do.
    """
    rich_table = Table(title=title, header_style="bold")
    rich_table.add_column("KPI", style="bold")
    for controller in table.index:
        rich_table.add_column(str(controller), justify="right")
    for column in table.columns:
        rich_table.add_row(
            escape(column_label(column, currency)), *(format_value(column, value) for value in table[column])
        )
    return rich_table
