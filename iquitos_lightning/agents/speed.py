"""The fast-path switches shared by SAC, PPO and A2C: ``torch.compile``, CUDA graphs and TF32, one field each.

Why switches, off by default: on a GPU, small-MLP RL is bound by kernel launches, and compiling
the update plus replaying it as a CUDA graph is what published numbers credit for large gains
(LeanRL: SAC 127 -> 725 frames/s on an H100). Each switch must earn its place by measurement
(``benchmarks/bench_speed.py``, the ``bench`` command), so each is opt-in in the agents and turned
on by the configs where measured: on the 2-core CPU, ``compile`` doubled SAC's updates/s at 64x64,
so ``sac_per_socket_cpu.yaml`` and the CPU profile turn it on for SAC (docs/performance.md).

- ``compile``: ``torch.compile`` of the agent's :meth:`loss_terms` (the losses' forward; AOTAutograd
  compiles their backward too). Optimizer steps stay in Lightning, so precision plugins, gradient
  scaling and hooks are untouched. Runs on the CPU as well.
- ``cuda_graphs``: the whole update step (losses, backward, optimizer steps, target update) is
  captured once by TensorDict's :class:`~tensordict.nn.CudaGraphModule` and replayed. Needs CUDA,
  fixed batch shapes, Adam with ``capturable=True`` (the agents ask for it) and no ``16-mixed``
  (its GradScaler reads the inf check on the host every step, which a graph cannot capture: use
  ``bf16-mixed`` or ``32-true``). Where these do not hold the run says so once and goes without.
- ``tf32``: TF32 matmuls on GPUs with compute capability >= 8.0 (Lightning's own tip for tensor
  cores); ignored elsewhere.
- ``threads``: torch's CPU threads for the run, set when ``fit`` starts (the card's ``ppo_cpu.yaml`` sets 1).
- ``fused_adam``: Adam's fused kernel (torch's ``fused=True``) instead of its multi-tensor ``foreach`` one: one pass
  over the parameters per step. Measured on the 2-core CPU (``bench --sections learner``, tariff profiles, one
  thread, ours / plain loop): SAC, three Adam steps an update, 0.78x -> 0.86x; PPO 0.79x -> 0.83x; A2C 0.70x both;
  with the update compiled SAC 1.06x and PPO 1.05x the frames/s of foreach (docs/performance.md). The same
  algorithm, not the same bits (the last bit of a weight moves now and then, and a run's trajectory parts from the
  foreach run's later), so it is off by default: the committed comparisons' runs repeat bit for bit without it;
  ``profile: auto`` turns it on for SAC and PPO on a CPU. With ``cuda_graphs`` on a GPU the capturable
  ``foreach`` Adam runs instead (a fused step under capture has not been measured here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from lightning.pytorch.utilities import rank_zero_warn
from tensordict import TensorDict
from tensordict.nn import CudaGraphModule

from iquitos_lightning.errors import ConfigError
from iquitos_lightning.fastpath.dynamo_fallback import compile_or_run_eagerly

HALF_WITH_SCALER = ("16-mixed", "16")


@dataclass
class SpeedConfig:
    """Fast-path switches of the update step (all off by default; see the module docstring)."""

    compile: bool = False  # torch.compile the loss computation (forward and backward); CPU too
    cuda_graphs: bool = False  # capture the whole update step as a CUDA graph (CUDA only, not with 16-mixed)
    tf32: bool = False  # TF32 matmuls where the GPU has them (compute capability >= 8.0)
    # torch's CPU threads for the run (None: torch's default, one per core). The twin's batched steps and 64x64
    # networks gain nothing from a second thread: the card's PPO ran 4,675 frames/s with 2 threads alone on the
    # 2-core machine and ~7,000 with 1 thread beside another run (docs/performance.md).
    threads: int | None = None
    fused_adam: bool = False  # Adam's fused kernel (same algorithm, not the same bits); not with CUDA graphs

    def __post_init__(self) -> None:
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"model.speed.threads must be at least 1 (or null: torch's default), got {self.threads}")


@dataclass(frozen=True)
class SpeedPlan:
    """The switches that will really run on this device, and why any was turned off."""

    speed: SpeedConfig
    notes: tuple[str, ...]


def plan_speed(speed: SpeedConfig, device: torch.device, precision: str, fixed_shapes: bool) -> SpeedPlan:
    """What of ``speed`` can run on ``device`` with ``precision``; ``fixed_shapes`` says whether every update sees
    the same batch shape (a CUDA graph replays one shape)."""
    notes: list[str] = []
    cuda_graphs = speed.cuda_graphs
    if cuda_graphs and device.type != "cuda":
        notes.append("cuda_graphs needs a CUDA device: running the update without CUDA graphs on the CPU")
        cuda_graphs = False
    if cuda_graphs and str(precision) in HALF_WITH_SCALER:
        notes.append(
            "cuda_graphs cannot capture 16-mixed (its GradScaler syncs with the host every step): running without; "
            "use --trainer.precision bf16-mixed or 32-true with CUDA graphs"
        )
        cuda_graphs = False
    if cuda_graphs and not fixed_shapes:
        notes.append(
            "cuda_graphs needs the same batch shape every update: make frames_per_batch a multiple of "
            "minibatch_size; running without"
        )
        cuda_graphs = False
    tf32 = speed.tf32 and device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 0)
    return SpeedPlan(replace(speed, cuda_graphs=cuda_graphs, tf32=tf32), tuple(notes))


def apply_tf32(enabled: bool) -> None:
    """TF32 for fp32 matmuls and convolutions (process-wide, as PyTorch's flags are)."""
    if enabled:
        torch.set_float32_matmul_precision("high")
        torch.backends.cudnn.allow_tf32 = True


def compiled(function: Callable[..., Any], enabled: bool) -> Callable[..., Any]:
    """``torch.compile(function)`` when enabled (compiled on its first call), else ``function`` itself.

    Where compiling itself fails (e.g. no C++ compiler for Inductor's CPU code on a laptop), that code runs
    eagerly rather than stopping the run (:mod:`~iquitos_lightning.fastpath.dynamo_fallback`): same results, slower.
    """
    if not enabled:
        return function
    return compile_or_run_eagerly(function)


def graphed(function: Callable[..., Any], enabled: bool, device: torch.device) -> Callable[..., Any]:
    """``function`` captured as a CUDA graph after a short eager warm-up when enabled, else itself."""
    if not enabled:
        return function

    def step_as_tensordict(batch: Any) -> TensorDict:  # CudaGraphModule returns tensordicts only
        return TensorDict(function(batch), batch_size=[])

    graph = CudaGraphModule(step_as_tensordict, in_keys=[], out_keys=[], warmup=3, device=device)
    return lambda batch: dict(graph(batch).items())


@dataclass(frozen=True)
class PlannedUpdate:
    """An agent's update step as it runs on this device: its losses (compiled or not) and its whole step
    (CUDA-graphed or not), and whether each update can be checked for non-finite values."""

    loss_fn: Callable[..., Any]
    update_fn: Callable[..., Any]
    checked: bool  # False inside a CUDA graph (the check is a host sync the capture cannot hold)
    speed: SpeedConfig  # the switches that really run here (read by benchmarks: after a fit the module is on the CPU)


def planned_update(
    speed: SpeedConfig,
    device: torch.device,
    precision: str,
    fixed_shapes: bool,
    loss_terms: Callable[..., Any],
    update: Callable[..., Any],
) -> PlannedUpdate:
    """Decide once per fit which switches run here, say why any cannot, and wrap the step accordingly."""
    plan = plan_speed(speed, device, precision, fixed_shapes)
    for note in plan.notes:
        rank_zero_warn(note)
    apply_tf32(plan.speed.tf32)
    if plan.speed.cuda_graphs:
        rank_zero_warn("cuda_graphs: updates run unchecked for non-finite losses (the check would break capture)")
    return PlannedUpdate(
        compiled(loss_terms, plan.speed.compile),
        graphed(update, plan.speed.cuda_graphs, device),
        checked=not plan.speed.cuda_graphs,
        speed=plan.speed,
    )


def make_adam(params: Any, lr: float, speed: SpeedConfig, device: torch.device) -> torch.optim.Adam:
    """Adam, ``capturable`` when the update will be captured in a CUDA graph (its step counter stays on the GPU).

    ``foreach``: one multi-tensor kernel per step instead of a Python loop over parameters (PyTorch picks it
    by itself on CUDA only; on the CPU the loop was a visible share of a small-network update). Same arithmetic.
    ``speed.fused_adam``: torch's fused kernel instead (faster again; not the same bits: see this module's
    docstring), except in a CUDA graph, which keeps the capturable ``foreach`` step.
    """
    capturable = speed.cuda_graphs and device.type == "cuda"
    if speed.fused_adam and not capturable:
        return torch.optim.Adam(params, lr=lr, fused=True)
    return torch.optim.Adam(params, lr=lr, capturable=capturable, foreach=True)
