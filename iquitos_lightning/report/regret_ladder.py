"""The regret ladder: where each row's bill exceeds the optimum's, by part (energy, demand charge) and by month.

Why a figure: a table gives one number per row; a reader wants to see at a glance which loss (the horizon, the
forecasts, the learning) and which months a controller's gap is made of, before reading any figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after the backend is chosen)
import pandas as pd  # noqa: E402

OPTIMUM_ROW = "optimum_tariff"


def plot_regret_ladder(
    table: pd.DataFrame, monthly: pd.DataFrame, path: Path, *, rungs: Sequence[str], agents: Sequence[str]
) -> Path:
    """Left: each row's yearly bill above the optimum's, split into energy + CO2 and demand charge (mean over test
    years), the references in ladder order then the agents. Right: the same regret per month for the ladder's MPC
    rungs and the agents."""
    monthly = monthly.copy()
    monthly["bill"] = monthly["energy_and_co2"] + monthly["demand_charge"]
    optimum = monthly[monthly["row"] == OPTIMUM_ROW].set_index("month")
    order = [row for row in (*rungs, *agents) if row in table.index]
    regret_energy = [table.loc[row, "energy_and_co2"] - table.loc[OPTIMUM_ROW, "energy_and_co2"] for row in order]
    regret_demand = [table.loc[row, "demand_charge"] - table.loc[OPTIMUM_ROW, "demand_charge"] for row in order]
    figure, (bars, lines) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [1, 1.2]})
    positions = range(len(order))[::-1]
    bars.barh(list(positions), [value / 1e3 for value in regret_energy], color="#4C72B0", label="energy + CO2")
    bars.barh(
        list(positions),
        [value / 1e3 for value in regret_demand],
        left=[max(value, 0) / 1e3 for value in regret_energy],
        color="#DD8452",
        label="demand charge",
    )
    labels = [f"{row}  ({table.loc[row, 'gap_closed_pct']:.0f} %)" for row in order]
    bars.set_yticks(list(positions), labels, fontsize=8)
    bars.set_xlabel("bill above the optimum's [PEN thousand / year]")
    bars.set_title("Regret ladder (gap closed in brackets)")
    bars.axvline(0, color="black", linewidth=0.8)
    bars.legend(loc="upper right", fontsize=8)
    for row in (*[rung for rung in rungs if rung.startswith("mpc_")], *agents):
        mine = monthly[monthly["row"] == row].set_index("month")
        if len(mine):
            lines.plot(mine.index, (mine["bill"] - optimum["bill"]) / 1e3, marker="o", markersize=3, label=row)
    lines.set_xlabel("month")
    lines.set_ylabel("bill above the optimum's [PEN thousand]")
    lines.set_title("Regret by month (mean over test years)")
    lines.set_xticks(range(1, 13))
    lines.grid(alpha=0.3)
    lines.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
