"""The CityLearn charger files of a site build: one CSV per socket, one row per hour (plus the padding row).

Why text written here rather than ``DataFrame.to_csv``: a year of the Iquitos site has 128 sockets, ~1.1 million
rows, and pandas formats each cell on its own (~2.5 s of CPU of a year's ~7.5 s build). Most rows are a socket's
away hours, one constant line; the others are formatted once each. The bytes are pandas' own: the test
(tests/site/test_charger_files.py) holds them against ``to_csv`` of the same table for the tiny site and a year of
the Iquitos site, so a built folder's hash (``BUILDER_VERSION``) did not change.
"""

from __future__ import annotations

import numpy as np

from iquitos_lightning.site.series import SiteSeries, plugged_steps

# CityLearn charger states: 1 = plugged in; 3 = EV away. The column must hold no blank: CityLearn
# parses states with ``str(s).isdigit()``, so a column pandas reads as float ("1.0") is all NaN.
PLUGGED_STATE = 1
AWAY_STATE = 3
CHARGER_COLUMNS = (
    "electric_vehicle_charger_state",
    "electric_vehicle_id",
    "electric_vehicle_departure_time",
    "electric_vehicle_required_soc_departure",
    "electric_vehicle_estimated_arrival_time",
    "electric_vehicle_estimated_soc_arrival",
    "electric_vehicle_session_id",
    "electric_vehicle_current_soc",
)
_AWAY_LINE = f"{AWAY_STATE},,,,,,,\n"  # an hour with no EV: the state and seven blanks


def charger_id(socket: int) -> str:
    """CityLearn id of a socket's charger (zero-padded so ids sort in socket order)."""
    return f"socket_{socket:03d}"


def ev_name(socket: int) -> str:
    """CityLearn id of the EV that every session of a socket uses."""
    return f"ev_{socket:03d}"


def charger_csv_texts(series: SiteSeries) -> list[str]:
    """Each socket's charger file as text: state 1 while a session is plugged in (the EV, the hours to its
    departure, its required SOC and its session id), its arrival SOC at the arrival hour, blanks elsewhere; one
    row past the last hour (CityLearn takes T-1 actions on T rows: see ``site/build.py`` ``_pad``)."""
    hours = series.hours + 1
    sessions = series.sessions
    socket_of = sessions["socket"].to_numpy(dtype=np.int64)
    arrival_all = sessions["arrival_step"].to_numpy(dtype=np.int64)
    leave_all = sessions["departure_step"].to_numpy(dtype=np.int64)
    required_all = sessions["required_soc"].to_numpy(dtype=np.float64)
    arrival_soc_all = sessions["arrival_soc"].to_numpy(dtype=np.float64)
    index_all = sessions.index.to_numpy(dtype=np.int64)
    header = ",".join(CHARGER_COLUMNS) + "\n"
    texts = []
    for socket in range(series.config.ev.socket_count):
        own = socket_of == socket
        arrival, leave, index = arrival_all[own], leave_all[own], index_all[own]
        session_of_step, steps = plugged_steps(arrival, leave, series.hours)  # a socket's sessions never overlap
        plugged = np.zeros(hours, dtype=bool)
        plugged[steps] = True
        departure = np.zeros(hours, dtype=np.int64)
        departure[steps] = leave[session_of_step] - steps
        required = np.full(hours, np.nan)
        required[steps] = required_all[own][session_of_step]
        current = np.full(hours, np.nan)
        current[arrival] = arrival_soc_all[own]
        session = np.full(hours, -1, dtype=np.int64)
        session[steps] = index[session_of_step]

        lines = [_AWAY_LINE] * hours
        ev = ev_name(socket)
        rows = np.flatnonzero(plugged | ~np.isnan(current))
        for row, is_plugged, hours_left, soc_needed, soc_now, session_index in zip(
            rows.tolist(),
            plugged[rows].tolist(),
            departure[rows].tolist(),
            required[rows].tolist(),
            current[rows].tolist(),
            session[rows].tolist(),
            strict=True,
        ):
            soc_cell = "" if soc_now != soc_now else repr(soc_now)  # NaN: a blank, as pandas writes it
            if is_plugged:
                lines[row] = (
                    f"{PLUGGED_STATE},{ev},{hours_left},{soc_needed!r},,{soc_cell},{ev}_{session_index},{soc_cell}\n"
                )
            else:  # an arrival hour outside any plugged hour (a session of no hour): only its SOC
                lines[row] = f"{AWAY_STATE},,,,,{soc_cell},,{soc_cell}\n"
        texts.append(header + "".join(lines))
    return texts
