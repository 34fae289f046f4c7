"""Hardware profiles: which batch, network, precision, buffer and fast-path settings a device class gets, and why.

Why: the earlier project's users hand-edited sizes for an 8 GB laptop GPU until it stopped running
out of memory. Here :func:`choose_profile` picks them from a :class:`~iquitos_lightning.profile.hardware.DeviceInfo`
(a pure function: any described GPU can be tested on a CPU machine), explicit settings win over the
automatic choice, the replay buffer is sized to the host RAM, and the result is checked against the
free device memory and refused with the numbers when it cannot fit (:mod:`iquitos_lightning.profile.memory_budget`).

Settings are named by their config path without ``init_args`` (``model.batch_size``,
``trainer.precision``), the way they are written on the command line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from iquitos_lightning.profile.hardware import GIB, DeviceInfo, device_class
from iquitos_lightning.profile.memory_budget import (
    BUFFER_SHARE_OF_AVAILABLE_RAM,
    DeviceEstimate,
    Workload,
    buffer_capacity_that_fits,
    check_buffer_fits,
    check_device_fits,
    device_estimate,
    network_shapes,
)

ALGORITHMS = ("sac", "ppo", "a2c")
# Measured on the 2-core CPU at 64x64 (docs/performance.md): PPO on the twin, where its ten epochs of minibatches are
# most of a rollout, 1.22-1.25x its eager frames/s and 0.98-1.07x the plain PyTorch loop's; A2C, one
# update per rollout, no gain (0.74x eager, 0.71x compiled). SAC compiled once doubled its updates/s (54 -> 105),
# before its loss ran eagerly on tensors (fastpath/lean_sac_loss.py; a compiled update runs the library's forward):
# since then the whole sac_auto fit ran 507 s eager against 562 s compiled (side by side), and the update alone
# 0.66-0.82x eager's at the fleet layout's sizes, 1.04-1.07x at the per-socket ones. Compiling costs 30-60 s at start.
CPU_COMPILED_ALGORITHMS = ("ppo",)
CPU_COMPILE_WHY = "measured on a 2-core CPU at 64x64: PPO on the twin 1.2x frames/s, the plain loop's; ~40 s at start"
CPU_EAGER_WHY = {
    "a2c": "measured on a 2-core CPU: A2C makes one update per rollout, no gain beyond noise",
    "sac": "measured on a 2-core CPU: SAC's eager update on tensors beats the compiled one (whole fit 507 vs 562 s)",
}
NOT_MEASURED = "not measured in a whole fit on a GPU yet: opt-in until gpu-check's profile fits say it wins"
# Whole fits of configs/sac_rtx4060.yaml on an H100 (results/gpu-check/2026-11-26-h100): 16-mixed eager 358 frames/s,
# bf16-mixed + CUDA graphs 2,257 (6.3x); the update step alone at 256x256 on an H200: 108 -> 729 updates/s. fp16's
# GradScaler syncs with the host every step, so 16-mixed cannot be captured; bf16 needs no scaler.
SAC_GPU_WHY = "measured: a whole SAC fit 6.3x faster in bf16-mixed with CUDA graphs than 16-mixed eager (H100)"
# Whole fits of configs/ppo_rtx4060.yaml on an H100 (results/gpu-check/2026-11-26-h100-fits): 16-mixed eager 4,153
# frames/s, 0.53x its CPU profile on the same machine; bf16-mixed + CUDA graphs 10,811 (2.6x; 1.39x the CPU profile).
PPO_GPU_WHY = "measured: a whole PPO fit 2.6x faster in bf16-mixed with CUDA graphs than 16-mixed eager (H100)"
GPU_GRAPHED_WHY = {"sac": SAC_GPU_WHY, "ppo": PPO_GPU_WHY}  # the agents whose GPU profiles train captured in bf16
# A2C's whole fits on the same H100: 16-mixed eager 11,265 frames/s, its CPU profile 11,657 (0.97x): one update per
# rollout, so a fit is collection on the twin, CPU work either way; nothing to capture that would show.
A2C_GPU_WHY = "measured: a whole A2C fit runs at its CPU profile's speed on an H100 (one update per rollout)"
# Adam's fused kernel, measured on the 2-core CPU (docs/performance.md, one thread, same rounds): SAC 0.78x -> 0.86x
# of the plain loop eager and 1.06x over foreach compiled; PPO 0.79x -> 0.83x eager, 1.05x compiled; A2C, one update
# per rollout, no change (0.70x both).
CPU_FUSED_ADAM_ALGORITHMS = ("sac", "ppo")
CPU_FUSED_ADAM_WHY = "measured on a 2-core CPU: SAC 1.06x, PPO 1.05x frames/s with the update compiled"


@dataclass(frozen=True)
class ClassProfile:
    """What one device class gets (before the device's own capabilities and the host RAM adjust it)."""

    label: str
    hidden_sizes: tuple[int, ...]
    sac_batch_size: int
    ppo_minibatch_size: int
    buffer_capacity: int  # SAC replay buffer, host RAM; capped to what the RAM holds
    why: str


PROFILES: dict[str, ClassProfile] = {
    "cpu": ClassProfile(
        label="CPU",
        hidden_sizes=(64, 64),
        sac_batch_size=128,
        ppo_minibatch_size=128,
        buffer_capacity=200_000,
        why="a 2-core CPU does ~50-90 SAC updates/s at 256x256 (measured): small networks keep runs to hours",
    ),
    "gpu-8gb": ClassProfile(
        label="8 GB GPU (RTX 4060 class)",
        hidden_sizes=(256, 256),
        sac_batch_size=256,
        ppo_minibatch_size=256,
        buffer_capacity=1_000_000,
        why="256x256 at batch 256 needs a few hundred MB of VRAM; the 1M buffer stays in host RAM",
    ),
    "gpu-16gb": ClassProfile(
        label="16 GB GPU (RTX 4080 class)",
        hidden_sizes=(256, 256),
        sac_batch_size=512,
        ppo_minibatch_size=512,
        buffer_capacity=1_000_000,
        why="same networks as the 8 GB class; small-MLP RL is launch-bound, so a larger batch is nearly free",
    ),
    "gpu-datacenter": ClassProfile(
        label="large/datacenter GPU (24 GB+: RTX 4090, A100, H100)",
        hidden_sizes=(512, 512),
        sac_batch_size=1024,
        ppo_minibatch_size=1024,
        buffer_capacity=2_000_000,
        why="wider networks and batches use the GPU's width; the buffer grows where the host has the RAM",
    ),
}


@dataclass(frozen=True)
class Setting:
    """One chosen value: where it came from and why."""

    key: str
    value: Any
    source: str  # "auto", "explicit" (command line or config file) or "checkpoint" (resume)
    why: str


@dataclass(frozen=True)
class ProfileChoice:
    """What :func:`choose_profile` decided for one device and algorithm."""

    device: DeviceInfo
    algorithm: str
    profile_class: str
    settings: tuple[Setting, ...]
    device_memory: DeviceEstimate
    buffer_bytes: int = 0
    notes: tuple[str, ...] = field(default=())

    def value(self, key: str) -> Any:
        return next(setting.value for setting in self.settings if setting.key == key)

    def automatic_values(self) -> dict[str, Any]:
        """The values the profile sets (those the user did not set)."""
        return {setting.key: setting.value for setting in self.settings if setting.source == "auto"}


def choose_precision(device: DeviceInfo, profile_class: str, algorithm: str) -> tuple[str, str]:
    """Trainer precision for the device and agent, and why."""
    if device.accelerator != "cuda":
        return "32-true", "half precision gains nothing on a CPU (measured); 16-true/bf16-true crash there"
    capability = device.compute_capability or (0, 0)
    if capability < (7, 0):
        return "32-true", f"compute capability {capability[0]}.{capability[1]} has no fp16 tensor cores"
    if algorithm in GPU_GRAPHED_WHY and device.supports_bf16:
        return "bf16-mixed", GPU_GRAPHED_WHY[algorithm]
    if profile_class == "gpu-datacenter" and device.supports_bf16:
        return (
            "bf16-mixed",
            "bf16 needs no loss scaling (no GradScaler sync per step, which CUDA graphs cannot capture)",
        )
    why = "fp16 autocast with loss scaling, as the product card asks"
    if device.supports_bf16:
        why += "; bf16-mixed also runs here (compute capability >= 8.0): --trainer.precision bf16-mixed"
    return "16-mixed", why


def choose_profile(
    device: DeviceInfo,
    algorithm: str,
    overrides: Mapping[str, Any],
    workload: Workload,
    *,
    profile_class: str | None = None,
    checkpoint_keys: frozenset[str] = frozenset(),
) -> ProfileChoice:
    """The settings for ``algorithm`` on ``device``; ``overrides`` (explicitly set values) always win.

    ``profile_class`` forces a class instead of the device's own (``--profile gpu-8gb`` on a shared
    16 GB card); ``checkpoint_keys`` are values restored from a checkpoint on resume (kept, since the
    weights' shapes depend on them). Raises :class:`~iquitos_lightning.profile.memory_budget.InsufficientMemory`
    when the result cannot fit in the free device memory or the host RAM.
    """
    algorithm = algorithm.lower()
    if algorithm not in ALGORITHMS:
        raise ValueError(f"auto profiles know {', '.join(ALGORITHMS)}, not {algorithm!r}")
    detected = device_class(device)
    chosen_class = profile_class or detected
    if chosen_class not in PROFILES:
        raise ValueError(f"unknown profile class {chosen_class!r}; choose one of {sorted(PROFILES)}")
    profile = PROFILES[chosen_class]
    cuda = device.accelerator == "cuda"

    precision, precision_why = choose_precision(device, chosen_class, algorithm)
    proposals: list[tuple[str, Any, str]] = [
        ("trainer.precision", precision, precision_why),
        ("model.hidden_sizes", list(profile.hidden_sizes), profile.why),
    ]
    on_twin = workload.twin_table_bytes > 0
    if algorithm == "sac":
        proposals.append(("model.batch_size", profile.sac_batch_size, f"{profile.label} profile"))
    elif algorithm == "ppo" and not on_twin:
        proposals.append(("model.minibatch_size", profile.ppo_minibatch_size, f"{profile.label} profile"))
    if on_twin:
        proposals += _twin_batch_proposals(cuda, algorithm)
    proposals += [
        _compile_proposal(cuda, algorithm),
        _fused_adam_proposal(cuda, algorithm),
        _cuda_graphs_proposal(
            cuda,
            algorithm,
            str(overrides.get("trainer.precision", precision)),
            anneals=bool(overrides.get("model.lr_anneal", False)),
        ),
        ("model.speed.tf32", cuda and device.supports_tf32, _tf32_why(device)),
        ("trainer.benchmark", cuda, "cuDNN autotuning on CUDA (no effect on MLPs, no cost)" if cuda else "CPU"),
    ]

    settings = [_resolve(key, value, why, overrides, checkpoint_keys) for key, value, why in proposals]
    values = {setting.key: setting.value for setting in settings}
    hidden = tuple(int(width) for width in values["model.hidden_sizes"])
    notes = []
    if profile_class and profile_class != detected:
        notes.append(f"profile class {profile_class} forced (the device alone would give {detected})")

    buffer_bytes = 0
    if algorithm == "sac":
        buffer_setting, buffer_bytes = _buffer_capacity(device, workload, profile, overrides, checkpoint_keys, values)
        settings.append(buffer_setting)
        settings.append(
            _resolve(
                "model.buffer.storage", "memory", "host RAM: only sampled batches move", overrides, checkpoint_keys
            )
        )
        gradient_rows = data_rows = int(values["model.batch_size"])
    elif algorithm == "ppo":
        gradient_rows, data_rows = int(values["model.minibatch_size"]), workload.frames_per_batch
    else:
        gradient_rows = data_rows = workload.frames_per_batch

    if on_twin and algorithm != "sac":
        workload = dataclasses.replace(workload, frames_per_batch=int(values["model.rollout.frames_per_batch"]))
        if algorithm == "ppo":
            gradient_rows, data_rows = int(values["model.minibatch_size"]), workload.frames_per_batch
        else:
            gradient_rows = data_rows = workload.frames_per_batch
    estimate = device_estimate(
        network_shapes(algorithm, workload, hidden), gradient_rows, data_rows, workload.transition_bytes
    )
    if cuda and values.get("model.env.backend.device") == "training":
        envs = int(values.get("model.env.backend.num_envs", 1))
        estimate = dataclasses.replace(estimate, env=workload.twin_bytes(envs))
    free = device.free_memory_bytes if cuda else device.host_available_bytes - buffer_bytes
    where = f"{device.name}" if cuda else "host RAM (next to the replay buffer)"
    check_device_fits(estimate, free, where, _what_to_lower(algorithm))
    return ProfileChoice(device, algorithm, chosen_class, tuple(settings), estimate, buffer_bytes, tuple(notes))


# The batch shape of the card's on-policy agents on the twin (envs, frames a rollout, PPO's minibatch), by where the
# twin steps: on the CPU the card profiles' (configs/ppo_cpu.yaml, a2c_cpu.yaml: 64 envs, the size the comparisons
# learned with); on a GPU the *_rtx4060 profiles' (4x the envs stepped at once on the device; PPO's rollouts a quarter
# the length, as 16-step rollouts did not learn: configs/ppo_rtx4060.yaml).
TWIN_BATCHES = {
    ("ppo", False): (64, 8192, 512),
    ("ppo", True): (256, 8192, 512),
    ("a2c", False): (64, 1024, None),
    ("a2c", True): (256, 4096, None),
}


def twin_frames_per_batch(algorithm: str, cuda: bool) -> int | None:
    """The frames a rollout the auto profile gives ``algorithm`` on the twin (None: SAC, whose rollouts it leaves)."""
    batch = TWIN_BATCHES.get((algorithm, cuda))
    return None if batch is None else batch[1]


def _twin_batch_proposals(cuda: bool, algorithm: str) -> list[tuple[str, Any, str]]:
    """Where the twin steps (on CUDA: on the device) and, for PPO and A2C, the batch shape that suits it."""
    if cuda:
        proposals = [("model.env.backend.device", "training", "the twin steps on the GPU: no host sync in a step")]
    else:
        proposals = [("model.env.backend.device", "cpu", "CPU: the twin steps where the agent trains either way")]
    if algorithm == "sac":
        return proposals
    envs, frames, minibatch = TWIN_BATCHES[(algorithm, cuda)]
    why = "the *_rtx4060 profile's GPU batch" if cuda else "the card's CPU batch (*_cpu profile)"
    proposals += [("model.env.backend.num_envs", envs, why), ("model.rollout.frames_per_batch", frames, why)]
    if minibatch is not None:
        proposals.append(("model.minibatch_size", minibatch, why))
    return proposals


def _resolve(key: str, value: Any, why: str, overrides: Mapping[str, Any], checkpoint_keys: frozenset[str]) -> Setting:
    if key in checkpoint_keys and key in overrides:
        return Setting(key, overrides[key], "checkpoint", f"restored from the checkpoint (auto would pick {value})")
    if key in overrides:
        return Setting(key, overrides[key], "explicit", f"set explicitly (auto would pick {value})")
    return Setting(key, value, "auto", why)


def _buffer_capacity(
    device: DeviceInfo,
    workload: Workload,
    profile: ClassProfile,
    overrides: Mapping[str, Any],
    checkpoint_keys: frozenset[str],
    values: Mapping[str, Any],
) -> tuple[Setting, int]:
    """The replay buffer's capacity: the profile's, capped to the buffer's share of available host RAM."""
    key = "model.buffer.capacity"
    per_transition = workload.transition_bytes
    available = device.host_available_bytes
    fits = buffer_capacity_that_fits(profile.buffer_capacity, per_transition, available)
    share = f"{BUFFER_SHARE_OF_AVAILABLE_RAM:.0%} of {available / 1024**3:.1f} GiB available RAM"
    if fits < profile.buffer_capacity:
        why = f"{profile.buffer_capacity:,} would not fit: capped to {share} at {per_transition:,} B/transition"
    else:
        why = f"{profile.label} profile; {fits * per_transition / 1024**3:.2f} GiB fits in {share}"
    setting = _resolve(key, fits, why, overrides, checkpoint_keys)
    if setting.source == "auto":
        minimum = max(10_000, 10 * int(values["model.batch_size"]))
        check_buffer_fits(fits * per_transition, available, minimum, fits)
    # An explicit capacity is checked by the buffer itself (agents/replay.py), in RAM or on disk.
    return setting, int(setting.value) * per_transition


def _compile_proposal(cuda: bool, algorithm: str) -> tuple[str, bool, str]:
    """``model.speed.compile``: on for the CPU where it measured faster, off (not yet measured) on GPUs."""
    if cuda:
        return ("model.speed.compile", False, NOT_MEASURED)
    if algorithm in CPU_COMPILED_ALGORITHMS:
        return ("model.speed.compile", True, CPU_COMPILE_WHY)
    return ("model.speed.compile", False, CPU_EAGER_WHY[algorithm])


def _cuda_graphs_proposal(cuda: bool, algorithm: str, precision: str, *, anneals: bool) -> tuple[str, bool, str]:
    """``model.speed.cuda_graphs``: on for SAC and PPO where their precision can be captured (measured 6.3x and
    2.6x whole fits), off for A2C (a whole fit measured collection-bound) and where the user anneals the learning
    rate (a captured step keeps the rate it was captured with; the agent refuses the pair)."""
    if not cuda:
        return ("model.speed.cuda_graphs", False, "CUDA graphs need a CUDA device")
    if anneals:
        return ("model.speed.cuda_graphs", False, "model.lr_anneal is on: a captured step would keep its first rate")
    if algorithm in GPU_GRAPHED_WHY and precision == "bf16-mixed":
        return ("model.speed.cuda_graphs", True, GPU_GRAPHED_WHY[algorithm])
    if algorithm in GPU_GRAPHED_WHY and precision in ("16-mixed", "16"):
        return ("model.speed.cuda_graphs", False, f"{precision} cannot be captured (fp16's GradScaler syncs)")
    if algorithm in GPU_GRAPHED_WHY:
        return ("model.speed.cuda_graphs", False, f"measured in bf16-mixed only; {precision} can opt in")
    return ("model.speed.cuda_graphs", False, A2C_GPU_WHY)


def _fused_adam_proposal(cuda: bool, algorithm: str) -> tuple[str, bool, str]:
    """``model.speed.fused_adam``: on for the CPU where it measured faster, off (not yet measured) on GPUs."""
    if cuda:
        return ("model.speed.fused_adam", False, NOT_MEASURED)
    if algorithm in CPU_FUSED_ADAM_ALGORITHMS:
        return ("model.speed.fused_adam", True, CPU_FUSED_ADAM_WHY)
    return ("model.speed.fused_adam", False, "measured on a 2-core CPU: A2C makes one update per rollout, no gain")


def _tf32_why(device: DeviceInfo) -> str:
    if device.accelerator != "cuda":
        return "TF32 is a CUDA tensor-core mode"
    if device.supports_tf32:
        return "TF32 matmuls on tensor cores (compute capability >= 8.0), as Lightning advises"
    return "this GPU has no TF32 (compute capability < 8.0)"


def _what_to_lower(algorithm: str) -> str:
    batch = {"sac": "--model.batch_size", "ppo": "--model.minibatch_size or --model.rollout.frames_per_batch"}
    knob = batch.get(algorithm, "--model.rollout.frames_per_batch")
    return f"Lower {knob} or --model.hidden_sizes, or free the device (other processes hold memory)."


def profile_table(choice: ProfileChoice) -> Table:
    """One rich table: the device, then each chosen setting with its source and reason, then the memory check."""
    device = choice.device
    if device.accelerator == "cuda":
        major, minor = device.compute_capability or (0, 0)
        seen = (
            f"{device.name}: {device.total_memory_gib:.1f} GiB, {device.free_memory_bytes / GIB:.1f} GiB free, "
            f"compute capability {major}.{minor}; host {device.host_available_bytes / GIB:.1f} GiB RAM available"
        )
    else:
        seen = f"{device.name}: {device.cpu_cores} cores, {device.host_available_bytes / GIB:.1f} GiB RAM available"
    table = Table(
        title=f"auto profile {choice.profile_class} for {choice.algorithm.upper()} - {seen}", title_justify="left"
    )
    table.add_column("setting", no_wrap=True)
    table.add_column("value", max_width=28, overflow="fold")
    table.add_column("source", no_wrap=True)
    table.add_column("why", ratio=1, overflow="fold")
    for setting in choice.settings:
        source = "[bold]explicit: wins[/bold]" if setting.source == "explicit" else setting.source
        table.add_row(setting.key, str(setting.value), source, setting.why)
    free = device.free_memory_bytes if device.accelerator == "cuda" else device.host_available_bytes
    needed = f"{choice.device_memory.total / GIB:.2f} of {free / GIB:.1f} GiB free"
    table.add_row("memory for training", needed, "estimate", f"checked before the run: {choice.device_memory.parts()}")
    if choice.buffer_bytes:
        table.add_row("host RAM for buffer", f"{choice.buffer_bytes / GIB:.2f} GiB", "estimate", "replay buffer in RAM")
    for note in choice.notes:
        table.add_row("note", note, "", "")
    return table


def print_profile_table(choice: ProfileChoice, console: Console | None = None) -> None:
    (console or Console(width=160)).print(profile_table(choice))
