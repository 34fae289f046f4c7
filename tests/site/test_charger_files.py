"""The charger files written as text (site/charger_files.py) are the bytes pandas wrote from the same table.

The oracle below is the builder's earlier code: the table as a DataFrame, written by ``DataFrame.to_csv``. Equal bytes
mean every folder built before is still what a build writes (its ``BUILDER_VERSION`` kept), and CityLearn reads the
same charger states, departures, SOCs and session ids.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from iquitos_lightning.site.build import CHARGER_DIR, build_site
from iquitos_lightning.site.charger_files import (
    AWAY_STATE,
    CHARGER_COLUMNS,
    PLUGGED_STATE,
    charger_csv_texts,
    charger_id,
    ev_name,
)
from iquitos_lightning.site.config import load_site_config
from iquitos_lightning.site.series import SiteSeries, plugged_steps

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "site" / "tiny.yaml"
DEFAULT = REPO / "configs" / "site" / "iquitos-2026.yaml"
RUNS_DATA = REPO / "data"  # where a run builds its site years: shared with the default-site and card-weights tests


def pandas_charger_tables(series: SiteSeries) -> list[pd.DataFrame]:
    """The charger tables as the builder made them before it wrote text (a DataFrame a socket)."""
    hours = series.hours + 1
    tables = []
    sessions = series.sessions
    for socket in range(series.config.ev.socket_count):
        state = np.full(hours, AWAY_STATE, dtype=np.int64)
        departure = np.full(hours, np.nan)
        required = np.full(hours, np.nan)
        current = np.full(hours, np.nan)
        session_id = np.full(hours, "", dtype=object)
        ev_id = np.full(hours, "", dtype=object)
        own = sessions[sessions["socket"] == socket]
        arrival = own["arrival_step"].to_numpy(dtype=np.int64)
        leave = own["departure_step"].to_numpy(dtype=np.int64)
        session_of_step, steps = plugged_steps(arrival, leave, series.hours)
        state[steps] = PLUGGED_STATE
        departure[steps] = leave[session_of_step] - steps
        required[steps] = own["required_soc"].to_numpy()[session_of_step]
        current[arrival] = own["arrival_soc"].to_numpy()
        names = np.array([f"{ev_name(socket)}_{index}" for index in own.index.to_numpy(dtype=np.int64)], dtype=object)
        session_id[steps] = names[session_of_step]
        ev_id[steps] = ev_name(socket)
        columns = (
            state,
            ev_id,
            pd.array(departure, dtype="Int64"),
            required,
            pd.array(np.full(hours, np.nan), dtype="Int64"),
            current,
            session_id,
            current,
        )
        tables.append(pd.DataFrame(dict(zip(CHARGER_COLUMNS, columns, strict=True))))
    return tables


@pytest.mark.parametrize("site", [TINY, DEFAULT], ids=["tiny", "iquitos-2026"])
def test_each_charger_file_is_the_bytes_pandas_writes_for_its_table(site: Path, tmp_path: Path) -> None:
    config = load_site_config(site)
    build = build_site(config, RUNS_DATA / config.name, progress=False)
    texts = charger_csv_texts(build.series)
    tables = pandas_charger_tables(build.series)
    assert len(texts) == len(tables) == config.ev.socket_count
    for socket, (text, table) in enumerate(zip(texts, tables, strict=True)):
        expected = tmp_path / f"{socket}.csv"
        table.to_csv(expected, index=False)
        assert text.encode() == expected.read_bytes(), f"socket {socket}"
        assert (RUNS_DATA / config.name / CHARGER_DIR / f"{charger_id(socket)}.csv").read_text() == text
    # not a vacuous equality: both kinds of rows are there
    assert sum(int((table[CHARGER_COLUMNS[0]] == PLUGGED_STATE).sum()) for table in tables) > 0
    assert all(f"\n{AWAY_STATE},,,,,,,\n" in text for text in texts)
