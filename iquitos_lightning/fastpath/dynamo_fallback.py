"""``torch.compile`` that falls back to eager code where compiling fails, instead of stopping the run.

What it overrides: the process-wide ``torch._dynamo.config.suppress_errors`` (off by default): with it on,
a compile failure (e.g. no C++ compiler for Inductor's CPU code on a laptop) is logged by PyTorch and that
code runs eagerly: the same results, slower. Set only when an agent asks for ``speed.compile``.

Checked at import: dynamo's config still has ``suppress_errors``. Equivalence: ``tests/agents/test_speed.py``
(compiled and eager updates give the same losses).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch._dynamo

from iquitos_lightning.fastpath.pins import require

require(torch._dynamo.config, ["suppress_errors"], library="torch", override=__name__)


def compile_or_run_eagerly(function: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compile(function)`` (compiled on its first call), with compile failures falling back to eager code."""
    torch._dynamo.config.suppress_errors = True
    return torch.compile(function)
