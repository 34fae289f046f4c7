"""The bench's ratios: ours over theirs, per round, median over rounds (a wrong way round would flip every goal)."""

from __future__ import annotations

import pytest

from iquitos_lightning.bench.timing import Rate, median_ratio


def test_median_ratio_is_numerator_rate_over_denominator_rate_per_round() -> None:
    ours = [Rate(1.0, {"frames": 300}), Rate(2.0, {"frames": 500}), Rate(1.0, {"frames": 100})]
    theirs = [Rate(1.0, {"frames": 100}), Rate(1.0, {"frames": 100}), Rate(1.0, {"frames": 100})]
    # rounds: 300/100 = 3.0, 250/100 = 2.5, 100/100 = 1.0 -> median 2.5
    assert median_ratio(ours, theirs, "frames") == pytest.approx(2.5)
    assert median_ratio(theirs, ours, "frames") == pytest.approx(0.4)  # 100/250


def test_rounds_must_pair_up() -> None:
    with pytest.raises(ValueError):
        median_ratio([Rate(1.0, {"frames": 1})], [], "frames")
