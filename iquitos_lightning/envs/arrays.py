"""Array-generic helpers: one function for numpy (the CityLearn env, the controllers) and torch (the twin).

Why one module: the CityLearn env and the twin must compute every mapping, bound and sum to the same bits, so the
action layouts, the import limit, the observation's fleet sums, the reward and the controllers of ``control/`` all
call these with whichever array they hold. Each uses only elementwise IEEE operations or a cumulative sum in index
order (never a library's own ``sum``, whose order numpy and torch do not share).
"""

from __future__ import annotations

from typing import Any

import numpy as np

# A numpy array or a torch tensor ([..., S] with any leading batch shape).
Array = Any


def is_torch(value: Array) -> bool:
    """Whether ``value`` is a torch tensor (numpy callers never import torch through these helpers)."""
    return hasattr(value, "clamp")


def where(condition: Array, a: Array, b: Array) -> Array:
    if is_torch(condition):
        import torch  # lazy: numpy callers (CityLearn env, controllers) never load torch here

        return torch.where(condition, a, b)
    return np.where(condition, a, b)


def minimum(a: Array, b: Array) -> Array:
    if is_torch(a):
        import torch  # lazy: numpy callers (CityLearn env, controllers) never load torch here

        return torch.minimum(a, b if is_torch(b) else torch.as_tensor(b, dtype=a.dtype, device=a.device))
    return np.minimum(a, b)


def clip_low(value: Array, low: float) -> Array:
    return value.clamp_min(low) if is_torch(value) else np.maximum(value, low)


def clip(value: Array, low: float, high: float) -> Array:
    """``value`` bounded to [low, high] (an array or tensor, or a numpy scalar)."""
    return value.clamp(low, high) if is_torch(value) else np.clip(value, low, high)


def clip_value(value: Any, low: float | None = None, high: float | None = None) -> Any:
    """``min(max(value, low), high)`` for a float, a numpy array or a torch tensor (``clamp``); either bound may be
    None. A Python float stays one (the CityLearn env's reward terms are floats)."""
    if isinstance(value, int | float):
        if low is not None:
            value = max(value, low)
        return value if high is None else min(value, high)
    if is_torch(value):
        return value.clamp(low, high)
    return np.clip(value, low, high)


def sequential_sum(values: Array) -> Array:
    """Sum over the last axis in index order (a cumulative sum's end): numpy and torch give the same bits,
    which their own ``sum`` (pairwise, vectorised) does not promise; the twin must equal CityLearn.

    Inside ``torch.compile`` on the CPU (the fused twin) a large sum is written out as a chain of adds, which Inductor
    fuses into the step's kernels: it has no CPU lowering of ``cumsum`` and calls ATen's, which with the fleet sums'
    stacked cumsum was a fifth of a fused 1,024-env step (docs/twin.md). Same order, same accumulator, so the same bits
    (tests/envs/test_arrays.py).
    """
    if is_torch(values):
        if _written_out(values):
            return _unrolled_sum(values)
        return values.cumsum(-1)[..., -1]
    return np.cumsum(values, axis=-1)[..., -1]


def sequential_sums(*columns: Array) -> list[Array]:
    """:func:`sequential_sum` of each of ``columns`` (same shape and dtype). Inside ``torch.compile`` they are
    stacked and summed by one written-out chain, so the graph grows by S adds, not S per column: the compile time
    grows with the graph (a chain of 128 adds cost the fused twin several seconds of compile)."""
    if columns and is_torch(columns[0]):
        import torch  # lazy: numpy callers (CityLearn env, controllers) never load torch here

        if _written_out(columns[0]):
            return list(_unrolled_sum(torch.stack(columns)).unbind(0))
    return [sequential_sum(column) for column in columns]


# Where a written-out sum pays: below this many elements (256 envs x 128 sockets) ATen's cumsum costs its call, a few
# microseconds, and the chain only adds compile time (~8 s of a cold 64-env compile for 1.02x its rate); from 256 envs
# it saves the loop (fused twin 1.68x -> 1.81x the eager one at 256 envs, 1.83x -> 1.97x at 1,024; docs/twin.md).
WRITTEN_OUT_MIN_ELEMENTS = 256 * 128


def _written_out(values: Any) -> bool:
    """Whether to sum ``values`` (a tensor) with :func:`_unrolled_sum`: while compiling, on the CPU (the chains were
    measured there only; on CUDA the device path's own tolerance applies), a float32 or float64 tensor (whose CPU
    cumsum accumulates in float64) large enough to pay (:data:`WRITTEN_OUT_MIN_ELEMENTS`)."""
    import torch  # lazy: numpy callers (CityLearn env, controllers) never load torch here

    return (
        torch.compiler.is_compiling()
        and values.dtype in (torch.float32, torch.float64)
        and values.device.type == "cpu"
        and values.numel() >= WRITTEN_OUT_MIN_ELEMENTS
    )


def _unrolled_sum(values: Any) -> Any:
    """``values.cumsum(-1)[..., -1]`` as ``((0 + v0) + v1) + ...``: ATen's CPU cumsum starts from 0 and adds in
    index order in float64 for float64 and float32 (its CPU accumulator type), rounding only what it writes."""
    import torch  # lazy: numpy callers (CityLearn env, controllers) never load torch here

    wide = values.to(torch.float64)
    total = 0.0 + wide[..., 0]
    for index in range(1, wide.shape[-1]):
        total = total + wide[..., index]
    return total.to(values.dtype)


def stacked_pair(first: Array, second: Array, like: Array) -> Array:
    """``[first, second]`` stacked on a new last axis, in ``like``'s library (and dtype for torch): a two-action
    ``[BESS, fleet]`` command of a batch or of one env."""
    if is_torch(like):
        import torch  # lazy: numpy callers never load torch here

        return torch.stack([first.to(like.dtype), second.to(like.dtype)], -1)
    return np.stack([np.asarray(first, dtype=float), np.asarray(second, dtype=float)], -1)
