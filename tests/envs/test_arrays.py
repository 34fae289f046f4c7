"""``sequential_sum``: the same bits from numpy, eager torch and ``torch.compile`` (the fused twin's written-out sum).

Why: the twin must equal CityLearn bit for bit, and the fused twin the eager one; the compiled path sums with a chain
of adds instead of ATen's cumsum, so it must keep cumsum's order and accumulator. The rows are built so that another
order or a float32 accumulator gives other bits (asserted first, so the test can fail).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iquitos_lightning.envs.arrays import WRITTEN_OUT_MIN_ELEMENTS, sequential_sum, sequential_sums


def _order_sensitive_rows(dtype: torch.dtype) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    shape = (-(-WRITTEN_OUT_MIN_ELEMENTS // 12), 12)  # large enough for the written-out sum
    rows = torch.randn(shape, generator=generator, dtype=torch.float64) * 10.0 ** torch.randint(-8, 9, shape)
    rows[0] = torch.tensor([1e16, 1.0, -1e16, 1.0, 3.0, -0.0, 2.5, 1e-3, 7.0, -7.0, 1e8, 1.0], dtype=torch.float64)
    rows[1] = -0.0
    return rows.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_compiled_sum_is_the_cumsum_bit_for_bit(dtype: torch.dtype) -> None:
    rows = _order_sensitive_rows(dtype)
    eager = sequential_sum(rows)
    assert torch.equal(eager, rows.cumsum(-1)[..., -1])
    assert not torch.equal(eager, rows.sum(-1)), "rows whose pairwise sum differs make the test able to fail"
    if dtype == torch.float32:  # ATen's CPU cumsum accumulates float32 in float64
        narrow = rows[..., 0]
        for index in range(1, rows.shape[-1]):
            narrow = narrow + rows[..., index]
        assert not torch.equal(eager, narrow), "a float32 accumulator would give other bits here"
    torch._dynamo.reset()  # a fresh graph: Dynamo falls back to eager without a word once its cache is full
    compiled = torch.compile(sequential_sum, dynamic=False, fullgraph=True)(rows)
    assert compiled.dtype == dtype
    assert torch.equal(compiled, eager)
    if dtype == torch.float64:  # what the CityLearn env sums (numpy's float32 cumsum accumulates in float32)
        assert torch.equal(torch.from_numpy(sequential_sum(rows.numpy())), eager)
    torch._dynamo.reset()


def test_numpy_sum_keeps_the_index_order() -> None:
    row = np.array([1e16, 1.0, -1e16, 1.0])
    assert sequential_sum(row) == 1.0  # ((1e16 + 1) - 1e16) + 1: the first 1 is lost in index order


def test_compiled_sums_of_several_columns_are_each_ones_cumsum() -> None:
    rows = _order_sensitive_rows(torch.float64)
    columns = (rows, rows.flip(-1), rows * 3.0)
    torch._dynamo.reset()
    compiled = torch.compile(sequential_sums, dynamic=False, fullgraph=True)(*columns)
    torch._dynamo.reset()
    assert len(compiled) == 3
    for summed, column in zip(compiled, columns, strict=True):
        assert torch.equal(summed, column.cumsum(-1)[..., -1])
    assert [torch.equal(a, b) for a, b in zip(sequential_sums(*columns), compiled, strict=True)] == [True] * 3
