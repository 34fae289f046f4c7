"""Tables printed to a log file keep their full width (rich cuts them to 80 columns off a terminal)."""

from __future__ import annotations

import io

import pandas as pd

from iquitos_lightning.console import LOG_FILE_WIDTH, command_console
from iquitos_lightning.report.tables import to_rich


def test_a_wide_table_reaches_a_log_file_whole() -> None:
    console = command_console()  # pytest captures the output: not a terminal, as a run sent to a file
    assert console.width == LOG_FILE_WIDTH
    table = pd.DataFrame(
        {"ev_energy_served_kwh": [228_123.456, 229_001.5], "pv_self_consumption_pct": [97.1, 96.5]},
        index=["mpc_forecast_tariff", "mpc_robust_tariff"],
    )
    console.file = io.StringIO()
    console.print(to_rich(table, "references"))
    printed = console.file.getvalue()
    assert "mpc_robust_tariff" in printed and "228,123" in printed and "…" not in printed
