"""How much device memory and host RAM a run's settings need, and a refusal with the numbers when they do not fit.

Why: the earlier project's runs died of out-of-memory hours in; the sizes that decide memory are all
known before the first rollout (network widths, batch rows, bytes per transition, buffer capacity),
so the run can refuse at start instead. The estimates are deliberately simple and generous:

- **device**: fp32 weights, gradients and Adam's two moments (16 B per parameter), target copies
  (SAC's twin Q), the batch moved to the device, and the activations of the forward/backward
  passes (batch rows x summed layer widths x passes x 4 B, kept in fp32 for margin even under mixed
  precision); then x1.5 plus 512 MiB for cuBLAS workspaces, the allocator's fragmentation and
  compile/CUDA-graph pools. The CUDA context is not counted: free memory is read after it exists.
- **host**: the replay buffer, from :func:`iquitos_lightning.agents.replay.bytes_per_transition`
  of a real transition (the same figure the buffer's own check uses).

Everything here is a pure function of numbers, so the refusal is tested with described GPUs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from iquitos_lightning.errors import ConfigError
from iquitos_lightning.profile.hardware import GIB

MIB = 1024**2
BYTES_PER_PARAMETER_TRAINED = 16  # fp32 weight + gradient + Adam exp_avg + exp_avg_sq
ACTIVATION_BYTES = 4  # per activation value (fp32 even under mixed precision: margin)
ACTIVATION_COPIES = 3  # forward output, its saved input for backward, and its gradient
DEVICE_MARGIN_FACTOR = 1.5
DEVICE_FIXED_OVERHEAD_BYTES = 512 * MIB
# Auto profiles give the replay buffer at most this share of available RAM (the env, the collector
# and the Python process need the rest); the buffer's own refusal is at 80% (agents/replay.py).
BUFFER_SHARE_OF_AVAILABLE_RAM = 0.5


class InsufficientMemory(ConfigError, MemoryError):
    """The chosen settings cannot fit in the free device memory or the available host RAM."""


def mlp_parameters(inputs: int, hidden_sizes: Sequence[int], outputs: int) -> int:
    """Weights and biases of a fully connected network ``inputs -> hidden... -> outputs``."""
    widths = [inputs, *hidden_sizes, outputs]
    return sum(fan_in * fan_out + fan_out for fan_in, fan_out in zip(widths[:-1], widths[1:], strict=True))


@dataclass(frozen=True)
class Workload:
    """The sizes of the problem that decide memory: what the env emits per step, and per rollout."""

    observation_dim: int
    action_dim: int
    transition_bytes: int  # one stored transition (obs, next obs, action, reward, flags, ...)
    frames_per_batch: int  # frames per collector rollout (PPO and A2C move the whole rollout to the device)
    # The twin's bytes were it to step on the device (envs/twin.py twin_device_bytes): its tables, and its state and
    # working set per env. Both 0: the env is not the twin.
    twin_table_bytes: int = 0
    twin_bytes_per_env: int = 0

    def twin_bytes(self, num_envs: int) -> int:
        """The device twin of ``num_envs`` envs with one rollout beside the copy the update reads."""
        rollout = self.frames_per_batch * self.transition_bytes
        return self.twin_table_bytes + num_envs * self.twin_bytes_per_env + rollout


@dataclass(frozen=True)
class NetworkShapes:
    """Parameters and activation passes of an agent's networks for one update."""

    trained_parameters: int  # parameters with gradients and Adam state
    target_parameters: int  # frozen copies (target networks): weights only
    activation_width: int  # summed hidden widths over the network passes of one update


def network_shapes(
    algorithm: str, workload: Workload, hidden_sizes: Sequence[int], policy_scale: str = "parameter"
) -> NetworkShapes:
    """Shapes of SAC (actor + twin Q + targets) or PPO/A2C (actor + state value) with ``hidden_sizes``.

    ``policy_scale`` is the on-policy actor's (``model.policy_scale``): "parameter", the network outputs the mean
    and one log-std per action is learned beside it ("fixed": kept, not learned); "state" (always SAC's), the
    network outputs mean and scale; "gsde", the mean and one noise weight per last hidden feature and action.
    """
    obs, act = workload.observation_dim, workload.action_dim
    if algorithm != "sac" and policy_scale in ("parameter", "fixed"):
        actor = mlp_parameters(obs, hidden_sizes, act) + act  # loc, and the log-std parameter
    elif algorithm != "sac" and policy_scale in ("gsde", "gsde_fixed") and hidden_sizes:
        actor = mlp_parameters(obs, hidden_sizes, act) + hidden_sizes[-1] * act  # loc, and gSDE's noise weights
    else:
        actor = mlp_parameters(obs, hidden_sizes, 2 * act)  # loc and scale
    width = sum(hidden_sizes) + 2 * act
    if algorithm == "sac":
        q_value = mlp_parameters(obs + act, hidden_sizes, 1)
        # actor on obs and next obs; twin Q on (obs, action), (next obs, next action) and (obs, new action)
        passes = 2 * width + 2 * 3 * (sum(hidden_sizes) + 1)
        return NetworkShapes(actor + 2 * q_value, 2 * q_value, passes)
    if algorithm in ("ppo", "a2c"):
        value = mlp_parameters(obs, hidden_sizes, 1)
        # actor once; value on obs and next obs (GAE) and again in the loss
        passes = width + 3 * (sum(hidden_sizes) + 1)
        return NetworkShapes(actor + value, 0, passes)
    raise ValueError(f"unknown algorithm {algorithm!r}: use 'sac', 'ppo' or 'a2c'")


@dataclass(frozen=True)
class DeviceEstimate:
    """Bytes an update needs on the training device, by part."""

    weights_and_optimizer: int
    targets: int
    batch: int
    activations: int
    env: int = 0  # a twin stepping on the device (env.backend.device: training): its tables, state and step

    @property
    def subtotal(self) -> int:
        return self.weights_and_optimizer + self.targets + self.batch + self.activations + self.env

    @property
    def total(self) -> int:
        """With margin: what must be free."""
        return int(self.subtotal * DEVICE_MARGIN_FACTOR) + DEVICE_FIXED_OVERHEAD_BYTES

    def parts(self) -> str:
        return (
            f"weights+grads+Adam {_gib(self.weights_and_optimizer)}, targets {_gib(self.targets)}, "
            f"batch {_gib(self.batch)}, activations {_gib(self.activations)}"
            + (f", twin {_gib(self.env)}" if self.env else "")
            + "; "
            f"x{DEVICE_MARGIN_FACTOR} + {DEVICE_FIXED_OVERHEAD_BYTES // MIB} MiB"
        )

    def describe(self) -> str:
        return f"{_gib(self.total)} ({self.parts()})"


def device_estimate(shapes: NetworkShapes, gradient_rows: int, data_rows: int, transition_bytes: int) -> DeviceEstimate:
    """Device memory of one update: ``gradient_rows`` transitions per backward pass, ``data_rows`` moved to the device.

    SAC moves and trains on one sampled batch (both are ``batch_size``); PPO moves its whole rollout
    and steps on minibatches; A2C steps on its whole rollout.
    """
    return DeviceEstimate(
        weights_and_optimizer=shapes.trained_parameters * BYTES_PER_PARAMETER_TRAINED,
        targets=shapes.target_parameters * 4,
        batch=data_rows * transition_bytes,
        activations=gradient_rows * shapes.activation_width * ACTIVATION_COPIES * ACTIVATION_BYTES,
    )


def buffer_capacity_that_fits(wanted: int, transition_bytes: int, available_ram_bytes: int) -> int:
    """``wanted`` transitions, or fewer when they would take more than the buffer's share of available RAM."""
    fits = int(BUFFER_SHARE_OF_AVAILABLE_RAM * available_ram_bytes) // max(transition_bytes, 1)
    return min(wanted, fits)


def check_device_fits(estimate: DeviceEstimate, free_bytes: int, where: str, what_to_change: str) -> None:
    """Refuse when the update cannot fit in the free device memory, with the numbers and what to lower."""
    if estimate.total > free_bytes:
        raise InsufficientMemory(
            f"the run needs about {estimate.describe()} on {where}, but only {_gib(free_bytes)} is free. "
            f"{what_to_change}"
        )


def check_buffer_fits(buffer_bytes: int, available_bytes: int, minimum_capacity: int, capacity: int) -> None:
    """Refuse a replay buffer too small to learn from (host RAM too small for the profile)."""
    if capacity < minimum_capacity:
        raise InsufficientMemory(
            f"host RAM too small for a replay buffer: {_gib(available_bytes)} available allows "
            f"{capacity:,} transitions ({_gib(buffer_bytes)}), fewer than the {minimum_capacity:,} needed. "
            "Free RAM, or use --model.buffer.storage memmap with --model.buffer.capacity on a large disk."
        )


def _gib(value: int) -> str:
    return f"{value / GIB:.2f} GiB"
