"""The LP builder's constraint matrix: stacked from triplets, the matrix scipy's ``vstack`` of the blocks gives."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from iquitos_lightning.control.objective_lp import ConstraintRows


def test_constraint_rows_are_the_csc_matrix_vstack_makes_of_the_same_blocks_array_for_array() -> None:
    """Blocks as solve_window adds them: parts with a value for all entries and parts with one per entry, entries
    out of column order, a block of zero rows, two parts on one entry (vstack sums them): the same data, indices,
    index pointers and dtypes, so HiGHS gets the same LP."""
    rng = np.random.default_rng(0)
    columns = 40
    blocks = [
        [(np.arange(6), rng.permutation(columns)[:6], 1.0), (np.arange(6), np.arange(6) + 20, -0.5)],
        [(np.array([], dtype=int), np.array([], dtype=int), 2.0)],
        [(np.array([0, 1, 1, 2]), np.array([39, 3, 3, 0]), rng.normal(size=4))],
        [(np.arange(5)[1:], np.arange(4) * 7, -1.0), (np.arange(5), np.full(5, 33), rng.normal(size=5))],
    ]
    heights = [6, 0, 3, 5]
    rows = ConstraintRows(columns)
    expected = []
    for parts, height in zip(blocks, heights, strict=True):
        rows.add(parts, height)
        values = np.concatenate([np.broadcast_to(np.asarray(v, dtype=float), r.shape) for r, _, v in parts])
        triplets = (values, (np.concatenate([r for r, _, _ in parts]), np.concatenate([c for _, c, _ in parts])))
        expected.append(sparse.coo_array(triplets, shape=(height, columns)))
    stacked = sparse.vstack(expected, format="csc")
    built = rows.matrix()

    assert built.format == "csc" and built.shape == stacked.shape == (14, columns)
    for name in ("data", "indices", "indptr"):
        ours, theirs = getattr(built, name), getattr(stacked, name)
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs), name
    repeated = blocks[2][0][2]
    assert built[7, 3] == repeated[1] + repeated[2]  # block 3 starts at row 6; its two entries at (1, 3) summed
