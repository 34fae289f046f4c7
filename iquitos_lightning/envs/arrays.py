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
    which their own ``sum`` (pairwise, vectorised) does not promise; the twin must equal CityLearn."""
    if is_torch(values):
        return values.cumsum(-1)[..., -1]
    return np.cumsum(values, axis=-1)[..., -1]


def stacked_pair(first: Array, second: Array, like: Array) -> Array:
    """``[first, second]`` stacked on a new last axis, in ``like``'s library (and dtype for torch): a two-action
    ``[BESS, fleet]`` command of a batch or of one env."""
    if is_torch(like):
        import torch  # lazy: numpy callers never load torch here

        return torch.stack([first.to(like.dtype), second.to(like.dtype)], -1)
    return np.stack([np.asarray(first, dtype=float), np.asarray(second, dtype=float)], -1)
