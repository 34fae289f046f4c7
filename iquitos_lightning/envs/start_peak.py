"""Where a training episode's billed peak-to-date starts: at the value a reference run of the year has there.

Why: the ``tariff`` reward charges each rise of the month-to-date peak-window import (envs/objectives.py). A
training twin whose episodes start mid-month (``start: staggered|random``) used to start that peak at 0, so the
first evening of every episode paid the whole month's demand charge again (-65 to -76 reward in one step on
the default site) and each 720-h episode paid about two such rises where the evaluation year, run from hour 0,
pays one a month. Those steps were most of a training episode's return (measured: docs/control.md), a cost the
evaluated policy never sees. Starting the peak where a reasonable controller has it at that hour of the year
keeps the reward's demand term what it is in evaluation: a rise is paid only for importing more than that.

The reference is the peak shaver (control/peak_shaver.py) run once over the year in a one-env twin from hour 0 with
the training twin's site, demand period and EV guarantee, by control/training_references.py; the twin is handed the
peaks as a table (envs/reference_tables.py).
"""

from __future__ import annotations

REFERENCE_PEAK = "reference"  # the reference run's peak at the episode's first step
ZERO_PEAK = "zero"  # 0 (a fresh month), whatever the hour: the behaviour before start_peak existed
START_PEAKS = (REFERENCE_PEAK, ZERO_PEAK)


def check_start_peak(start_peak: str) -> str:
    if start_peak not in START_PEAKS:
        raise ValueError(f"env.training.start_peak must be one of {START_PEAKS}, got {start_peak!r}")
    return start_peak
