"""The split of an agent's remaining gap (report/loss_split.py) from a test-year table's rows."""

from __future__ import annotations

import pandas as pd
import pytest

from iquitos_lightning.report.loss_split import hours_known_first, loss_split, loss_split_markdown

OPTIMUM, PERFECT = "optimum_tariff", "mpc_perfect_tariff"


def table(**gaps: float) -> pd.DataFrame:
    return pd.DataFrame({"gap_closed_pct": gaps}).rename(index=lambda name: name.replace("_plus_", "+"))


def test_the_three_parts_are_differences_of_rungs_and_sum_to_the_gap_the_agent_leaves():
    rows = table(optimum_tariff=100.0, mpc_perfect_tariff=99.0, ppo_plus_oracle=93.5, ppo=89.5, sac=88.0)
    split = loss_split(rows, "ppo", OPTIMUM, PERFECT)
    assert split == pytest.approx({"horizon": 1.0, "learning": 5.5, "information": 4.0})
    assert sum(split.values()) == pytest.approx(100.0 - 89.5)
    assert loss_split(rows, "sac", OPTIMUM, PERFECT) is None  # no sac+oracle row: no split


def test_an_agent_that_beats_the_planner_with_the_hours_known_has_a_negative_learning_part():
    rows = table(optimum_tariff=100.0, mpc_perfect_tariff=97.0, ppo_plus_oracle=98.0, ppo=90.0)
    assert loss_split(rows, "ppo", OPTIMUM, PERFECT)["learning"] == pytest.approx(-1.0)


def test_the_markdown_lists_only_agents_with_their_hours_known_row_and_the_ladder_puts_that_row_first():
    rows = table(optimum_tariff=100.0, mpc_perfect_tariff=99.0, ppo_plus_oracle=93.5, ppo=89.5, sac=88.0)
    lines = loss_split_markdown(rows, ["sac", "ppo", "ppo+oracle"], OPTIMUM, PERFECT)
    assert "| ppo | 10.5 | 1.0 | 5.5 | 4.0 |" in lines and not any(line.startswith("| sac") for line in lines)
    assert loss_split_markdown(rows, ["sac"], OPTIMUM, PERFECT) == []
    assert hours_known_first(["sac", "ppo", "ppo+oracle"]) == ["ppo+oracle", "sac", "ppo"]
