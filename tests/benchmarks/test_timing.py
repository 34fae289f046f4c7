"""The bench's ratios: ours over theirs, per round, median over rounds (a wrong way round would flip every goal)."""

from __future__ import annotations

import pytest

from benchmarks.bench.timing import Rate, median_ratio


def test_median_ratio_is_numerator_rate_over_denominator_rate_per_round() -> None:
    ours = [Rate(1.0, {"frames": 300}), Rate(2.0, {"frames": 500}), Rate(1.0, {"frames": 100})]
    theirs = [Rate(1.0, {"frames": 100}), Rate(1.0, {"frames": 100}), Rate(1.0, {"frames": 100})]
    # rounds: 300/100 = 3.0, 250/100 = 2.5, 100/100 = 1.0 -> median 2.5
    assert median_ratio(ours, theirs, "frames") == pytest.approx(2.5)
    assert median_ratio(theirs, ours, "frames") == pytest.approx(0.4)  # 100/250


def test_rounds_must_pair_up() -> None:
    with pytest.raises(ValueError):
        median_ratio([Rate(1.0, {"frames": 1})], [], "frames")


def test_the_setup_is_kept_out_of_collections_only_while_a_side_runs_even_when_it_fails() -> None:
    """A garbage cycle made before a timed side is not collected during it (no full collection scans the setup in
    the window) and is collected once the side has ended, also after an error: the bench keeps nothing alive."""
    import gc
    import weakref

    from benchmarks.bench.timing import setup_kept_out_of_collections

    class Node:
        pass

    def setup_garbage() -> weakref.ref:
        node = Node()
        node.itself = node  # a cycle: only the collector frees it
        return weakref.ref(node)

    gone = setup_garbage()
    with pytest.raises(RuntimeError), setup_kept_out_of_collections():
        assert gc.get_freeze_count() > 0
        gc.collect()
        assert gone() is not None  # frozen: not scanned
        raise RuntimeError("a side that fails")
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None
