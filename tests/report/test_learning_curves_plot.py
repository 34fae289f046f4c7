"""The comparison's learning-curve figure: a style per agent row that no other row shares, a zoomed panel around the
rule-to-optimum range in the direction that is better, and a figure that renders a dozen rows with references."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib import image

from iquitos_lightning.report.comparison import agent_style, plot_learning_curves, zoom_limits


def test_twenty_agent_rows_get_twenty_different_styles_then_the_cycle_repeats() -> None:
    styles = [tuple(str(value) for value in agent_style(index).values()) for index in range(20)]
    assert len(set(styles)) == 20
    assert agent_style(20) == agent_style(0) and agent_style(3)["marker"] == "." and agent_style(13)["ls"] == "--"


def test_the_zoom_spans_two_gaps_below_the_rule_to_half_a_gap_beyond_the_optimum() -> None:
    # thesis return (higher is better): rule -695.95, optimum -693.77, gap 2.18
    low, high = zoom_limits(-695.95, -693.77)
    assert low == pytest.approx(-700.31) and high == pytest.approx(-692.68)
    # tariff bill (lower is better): the same reading, the other way up
    low, high = zoom_limits(4_965_332.0, 3_914_624.0)
    gap = 1_050_708.0
    assert low == pytest.approx(3_914_624.0 - 0.5 * gap) and high == pytest.approx(4_965_332.0 + 2 * gap)


def test_a_dozen_rows_with_references_and_budgets_twenty_times_apart_render(tmp_path: Path) -> None:
    curves = {}
    for row in range(12):
        frames = np.array([22_016, 44_032, 131_072]) * (12 if row == 0 else 1)  # PPO-like budget beside SAC's
        values = -700.0 + row * 0.3 + np.array([0.0, 1.0, 1.5])
        chosen = np.array([0.0, 1.0, 0.5])
        curves[f"agent{row}-seed0"] = pd.DataFrame(
            {
                "frames": frames,
                "objective_value": values,
                "co2_kg": 3.3e6,
                "cost": 2.5e6,
                "peak_import_kw": 2750.0,
                "selection_score": chosen,
            }  # fmt: skip
        )
    references = pd.DataFrame(
        {
            "objective_value": [-695.95, -693.77],
            "co2_kg": [3.3e6, 3.32e6],
            "cost": [2.57e6, 2.52e6],
            "peak_import_kw": [2728.5, 2721.1],
        },  # fmt: skip
        index=["rule_based", "optimum_thesis"],
    )
    references.attrs["objective"] = "thesis"
    path = plot_learning_curves(curves, tmp_path / "curves.png", title="tiny:", references=references)
    picture = image.imread(path)
    assert picture.shape[0] > picture.shape[1] > 1000  # five panels stacked, the legend beside them


def test_runs_a_restart_did_not_report_are_drawn_faint_and_unstarred(tmp_path: Path) -> None:
    curves = {
        f"sac-seed{seed}": pd.DataFrame(
            {"frames": [1_000, 2_000], "objective_value": [-700.0 + seed, -698.0 + seed], "selection_score": [0.0, 1.0]}
        )
        for seed in range(3)
    }
    every = image.imread(plot_learning_curves(curves, tmp_path / "every.png"))
    one = image.imread(plot_learning_curves(curves, tmp_path / "one.png", reported={"sac-seed1"}))
    assert every.shape == one.shape

    def strong_colour(picture: np.ndarray) -> int:  # pixels of a full-strength agent colour, not grey text or faint
        rgb = picture[..., :3]
        return int((rgb.max(axis=-1) - rgb.min(axis=-1) > 0.4).sum())

    # two of the three curves and their stars fade: about a third of the strong colour is left
    assert strong_colour(one) < 0.6 * strong_colour(every)
