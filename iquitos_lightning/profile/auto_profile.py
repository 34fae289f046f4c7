"""The auto profile inside LightningCLI: the ``profile`` option, and filling the values the user did not write.

Why a module of its own: :mod:`iquitos_lightning.cli` only calls :func:`add_profile_argument` and
:func:`apply_profile`; the choice itself is :func:`iquitos_lightning.profile.profiles.choose_profile`.
``profile: auto`` (or ``--profile auto``) reads the device, reads the configured env's sizes from its
specs (observation, action, bytes per stored transition; no site is built, the agent builds its env
once), chooses, writes the automatic values into the
parsed config before the classes are instantiated, and prints one table. What the user wrote on
the command line or in a config file wins (:mod:`iquitos_lightning.profile.explicit_settings`); on resume
from a checkpoint file the model's values come from the checkpoint and are kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

from jsonargparse import Namespace
from jsonargparse.typing import import_object
from rich.console import Console

from iquitos_lightning.profile.explicit_settings import explicit_keys, is_explicit
from iquitos_lightning.profile.hardware import DeviceInfo, detect_device
from iquitos_lightning.profile.memory_budget import Workload
from iquitos_lightning.profile.profiles import ProfileChoice, choose_profile, print_profile_table

ProfileName = Literal["off", "auto", "cpu", "gpu-8gb", "gpu-16gb", "gpu-datacenter"]
PROFILE_KEYS = (
    "trainer.precision",
    "trainer.benchmark",
    "model.hidden_sizes",
    "model.batch_size",
    "model.minibatch_size",
    "model.buffer.capacity",
    "model.buffer.storage",
    "model.speed.compile",
    "model.speed.fused_adam",
    "model.speed.cuda_graphs",
    "model.speed.tf32",
    "model.env.backend.device",
    "model.env.backend.num_envs",
    "model.rollout.frames_per_batch",
)


def add_profile_argument(parser: Any) -> None:
    parser.add_argument(
        "--profile",
        type=ProfileName,
        default="off",
        help="Hardware profile: 'auto' picks batch, network, precision and buffer sizes for this device "
        "(explicit settings win); a class name (cpu, gpu-8gb, gpu-16gb, gpu-datacenter) forces that class; "
        "'off' uses the config as written.",
    )


def config_path(key: str) -> str:
    """``model.batch_size`` -> ``model.init_args.batch_size`` (where LightningCLI keeps model arguments)."""
    head, _, rest = key.partition(".")
    return f"model.init_args.{rest}" if head == "model" else key


def apply_profile(
    config: Namespace, written_args: Sequence[str], device: DeviceInfo | None = None, console: Console | None = None
) -> ProfileChoice | None:
    """Choose and write the profile's values into ``config`` (one subcommand's namespace); None when off."""
    mode = config.get("profile") or "off"
    if mode == "off":
        return None
    device = device or detect_device()
    agent_class: ProfiledAgent = import_object(str(config["model.class_path"]))
    algorithm = agent_class.algorithm or "unknown"
    written = explicit_keys(written_args)
    ckpt_path = config.get("ckpt_path")
    from_checkpoint = bool(ckpt_path) and Path(str(ckpt_path)).is_file()
    overrides: dict[str, Any] = {}
    checkpoint_keys = set()
    for key in PROFILE_KEYS:
        restored = from_checkpoint and key.startswith("model.")
        if (is_explicit(key, written) or restored) and _has(config, config_path(key)):
            overrides[key] = _get(config, agent_class, config_path(key))
            if restored and not is_explicit(key, written):
                checkpoint_keys.add(key)
    choice = choose_profile(
        device,
        algorithm,
        overrides,
        workload_of(config["model.init_args"], agent_class),
        profile_class=None if mode == "auto" else mode,
        checkpoint_keys=frozenset(checkpoint_keys),
    )
    for key, value in choice.automatic_values().items():
        _set(config, agent_class, config_path(key), value)
    print_profile_table(choice, console)
    return choice


class ProfiledAgent(Protocol):
    """What the auto profile asks of the agent class named in the config (read from the class, never imported)."""

    algorithm: str | None  # "sac", "ppo" or "a2c": which profile keys apply
    config_groups: ClassVar[dict[str, type]]  # dataclass argument groups, filled with defaults when unset

    @classmethod
    def profile_workload(cls, model_args: Mapping[str, Any]) -> Workload:
        """The configured env's sizes, read from its specs (no site is built)."""
        ...


def workload_of(model_args: Namespace, agent_class: ProfiledAgent) -> Workload:
    """Sizes of the configured env (observation, action, bytes per stored transition with the policy's outputs),
    from the agent class and the env's specs: no site is built here, the agent builds its env once."""
    return agent_class.profile_workload(_plain(model_args))


def _has(config: Namespace, path: str) -> bool:
    """Whether ``path`` exists in ``config`` (a parent group that is None, like an unset ``buffer``, counts)."""
    parent, _, _ = path.rpartition(".")
    return path in config or (parent in config and config[parent] is None)


def _get(config: Namespace, agent_class: ProfiledAgent, path: str) -> Any:
    parent, _, leaf = path.rpartition(".")
    if parent in config and config[parent] is None:
        return getattr(_group_defaults(agent_class, parent), leaf)
    return _plain(config[path])


def _set(config: Namespace, agent_class: ProfiledAgent, path: str, value: Any) -> None:
    """Set ``path``; a dataclass group that is still None (``buffer``, ``speed``) is first filled with its defaults."""
    parent, _, _ = path.rpartition(".")
    if parent in config and config[parent] is None:
        config[parent] = Namespace(**asdict(_group_defaults(agent_class, parent)))
    if path in config or parent in config:
        config[path] = value


def _group_defaults(agent_class: ProfiledAgent, path: str) -> Any:
    """The default of a dataclass argument group (``model.init_args.buffer`` -> the agent's buffer config)."""
    return agent_class.config_groups[path.rpartition(".")[2]]()


def _plain(value: Any) -> Any:
    """A jsonargparse Namespace as a dict (the form ``as_config`` and the profile table take)."""
    if isinstance(value, Namespace):
        return value.as_dict()
    if isinstance(value, tuple):
        return list(value)
    return value
