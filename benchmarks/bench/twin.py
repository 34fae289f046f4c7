"""The training twin's frames/s against its batch size (``num_envs``), stepped as a collector steps it, on a device.

Why this measurement: a run on the twin is only as fast as its collection, and the twin's answer to a faster device
is a larger batch (``env.backend.num_envs``; on a GPU with ``env.backend.device: training`` the twin steps where the
agent trains: envs/twin.py). Whether that pays is a curve, not a number: frames/s at 64 envs (the card's), 256, 1024,
4096... and each size's ratio to the first. The twin is the one agents train on (:class:`~iquitos_lightning.envs.
training_twin.TrainingTwin`) with the card's problem (configs/base/card.yaml: the site, layout
``self_consumption_window``, objective ``tariff``, staggered 720-h episodes over the four training years and the start
peaks they need), and it is stepped by TorchRL's ``Collector`` with a random policy on the twin's device, its rollouts
stored there and checked once each as the agents' collection does (agents/collection.py): what a fit's collection
costs without the policy network. ``bench`` prints it on the CPU (one torch thread); ``gpu-check --only device-twin``
runs it on CUDA beside the CPU, with the peak VRAM of each size.

Building a twin costs seconds of table building per training year (``build_site_tables``) and the years and start
peaks themselves, none of which depend on ``num_envs``: :func:`training_twins` builds them once and each size reuses
them (:func:`shared_site_tables`), so a five-size table builds the years' tables once instead of five times.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

CARD = "configs/base/card.yaml"  # the card's problem and protocol: what every card profile trains on
STEPS_PER_ROLLOUT = 16  # rollout length of the measurement: short, so a 4096-env CPU rollout takes a second or two
LEAST_TIMED_ROLLOUTS = 3


@dataclass
class TwinSpeed:
    """The twin's row in the env-speed table (the first row of :func:`measure_twin_scaling`)."""

    status: str  # "measured" or why not
    steps_per_s: float | None = None  # env steps (all envs together) per second
    num_envs: int = 0


@dataclass
class TwinScalingRow:
    """The training twin at one batch size on one device."""

    device: str  # "cpu" or "cuda"
    num_envs: int
    status: str  # "measured", or why not (an error, "out of memory under the cap")
    frames_per_s: float | None = None  # env steps of all envs together per second, collector included
    ratio_to_first: float | None = None  # frames/s over the first measured size's on the same device
    rollouts: int = 0  # timed rollouts of STEPS_PER_ROLLOUT steps each
    seconds: float = 0.0  # timed window
    threads: int = 1  # torch's CPU threads during the measurement
    peak_allocated_mib: float | None = None  # CUDA: torch.cuda.max_memory_allocated over the twin's move and rollouts
    peak_reserved_mib: float | None = None  # CUDA: max_memory_reserved, the allocator's footprint


def card_env_config(site: str | None = None, data_root: str = "data", *, years: bool = True) -> Any:
    """The card's env config (configs/base/card.yaml) on ``site`` (default: the card's), the twin on the CPU;
    ``years=False`` trains on the site itself (the tiny site of ``--quick`` has no training years built)."""
    # lazy: the env config imports the site and env layers (torch, numpy) only when a twin is measured
    from iquitos_lightning.envs.env_config import EnvConfig
    from iquitos_lightning.profile.bases import profile_yaml

    env = dict(profile_yaml(CARD)["model"]["init_args"]["env"])
    # the twin on the CPU: the bench moves it itself
    env["backend"] = {**env.get("backend", {}), "device": "cpu", "data_root": data_root}
    if site is not None:
        env["site"] = site
    if not years:
        env["training"] = {**env.get("training", {}), "train_site_seeds": None}
        env["validation_site_seed"] = None
    return EnvConfig(**env)


@contextlib.contextmanager
def shared_site_tables() -> Iterator[None]:
    """Twins built inside reuse the site tables of the year series earlier twins built (same options): the tables are
    a pure function of the year and the problem, and building them is most of a twin's construction."""
    # lazy: the twin module loads torch and the site layer
    from iquitos_lightning.envs import twin as twin_module

    build = twin_module.build_site_tables
    built: dict[tuple, Any] = {}

    def cached(series: Any, reward_scales: Any, *options: Any) -> Any:
        key = (id(series), repr(reward_scales), options)
        if key not in built:
            built[key] = build(series, reward_scales, *options)
        return built[key]

    twin_module.build_site_tables = cached
    try:
        yield
    finally:
        twin_module.build_site_tables = build


@contextlib.contextmanager
def twin_maker(config: Any) -> Iterator[Callable[..., Any]]:
    """A function that builds the training twin of ``config`` at a size (``make(size, **overrides)``, overrides: the
    twin's keyword arguments, e.g. ``compile_physics``), on the CPU; its years, start peaks and tables built once for
    every twin it builds while open."""
    # lazy: the twin, its reference runs and the site years load only when a twin is measured
    from iquitos_lightning.control.training_references import reference_tables
    from iquitos_lightning.envs.factory import twin_options
    from iquitos_lightning.envs.training_twin import make_torchrl_twin

    references = reference_tables(config)
    options = twin_options(config)
    aids = {"references": references, "critic_forecasts": config.training.critic_forecasts}

    def make(size: int, **overrides: Any) -> Any:
        return make_torchrl_twin(config.site, **{**options, "num_envs": size, **overrides}, **aids)

    with shared_site_tables():
        yield make


def training_twins(config: Any, sizes: tuple[int, ...]) -> Iterator[Any]:
    """The training twin of ``config`` at each size in turn, on the CPU, its years, start peaks and tables built once
    (one twin alive at a time: the caller drops each before the next)."""
    with twin_maker(config) as make:
        for size in sizes:
            yield make(size)


def collector_frames_per_s(twin: Any, seconds: float = 2.0) -> tuple[float, int, float]:
    """Frames/s of ``twin`` under TorchRL's ``Collector`` with a random policy on the twin's device, rollouts of
    :data:`STEPS_PER_ROLLOUT` steps stored there, each checked as agents/collection.py checks a rollout; one untimed
    rollout first, then rollouts for at least ``seconds`` (and :data:`LEAST_TIMED_ROLLOUTS`). Returns frames/s, the
    timed rollouts and the timed seconds."""
    # lazy: TorchRL's collectors load only when a twin is measured
    from torchrl.collectors import Collector

    device = twin.device
    collector = Collector(
        twin, None, frames_per_batch=twin.num_envs * STEPS_PER_ROLLOUT, total_frames=-1, env_device=device,
        policy_device=device, storing_device=device, auto_register_policy_transforms=False, track_traj_ids=False,
    )  # fmt: skip
    check = None if twin.checks_every_step else twin.check_rollout  # a sync-free twin checks rollouts, not steps
    try:
        rollouts = iter(collector)
        first = next(rollouts)
        if check is not None:
            check(first)
        _synchronize(device)
        frames, timed, started = 0, 0, time.perf_counter()
        while timed < LEAST_TIMED_ROLLOUTS or time.perf_counter() - started < seconds:
            rollout = next(rollouts)
            if check is not None:
                check(rollout)
            frames += rollout.numel()
            timed += 1
        _synchronize(device)
        elapsed = time.perf_counter() - started
    finally:
        collector.shutdown()
    return frames / elapsed, timed, elapsed


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_twin_scaling(
    config: Any,
    sizes: tuple[int, ...],
    *,
    devices: tuple[str, ...] = ("cpu",),
    cpu_sizes: tuple[int, ...] | None = None,
    seconds: float = 2.0,
) -> list[TwinScalingRow]:
    """One row per (device, size): each twin is built once on the CPU, timed there (sizes in ``cpu_sizes``, all by
    default), then moved to each other device and timed there with its peak memory. A CUDA size that runs out of
    memory (the ``IQUITOS_GPU_MEMORY_CAP_GIB`` cap included) ends that device's rows: larger ones would too."""
    cpu_sizes = sizes if cpu_sizes is None else cpu_sizes
    rows: list[TwinScalingRow] = []
    full: set[str] = set()  # devices that ran out of memory
    for size, twin in zip(sizes, training_twins(config, sizes), strict=True):
        for device in devices:
            if device == "cpu" and size not in cpu_sizes:
                continue
            if device in full:
                rows.append(TwinScalingRow(device, size, "not run: a smaller size ran out of memory"))
                continue
            row = _measure_on(twin, device, seconds)
            full |= {device} if row.status.startswith("out of memory") else set()
            rows.append(row)
        del twin
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    _ratios(rows)
    return rows


def _measure_on(twin: Any, device: str, seconds: float) -> TwinScalingRow:
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    try:
        moved = twin.to(device)
        rate, rollouts, elapsed = collector_frames_per_s(moved, seconds)
    except torch.OutOfMemoryError:
        return TwinScalingRow(device, twin.num_envs, "out of memory under the cap")
    except Exception as error:  # a row reports, it never aborts the table
        return TwinScalingRow(device, twin.num_envs, f"error: {type(error).__name__}: {error}"[:300])
    finally:
        if cuda:  # back to the CPU: the next device (or size) starts from an empty card
            twin.to("cpu")
    row = TwinScalingRow(device, twin.num_envs, "measured", rate, None, rollouts, elapsed, torch.get_num_threads())
    if cuda:
        row.peak_allocated_mib = torch.cuda.max_memory_allocated() / 2**20
        row.peak_reserved_mib = torch.cuda.max_memory_reserved() / 2**20
    return row


def _ratios(rows: list[TwinScalingRow]) -> None:
    first: dict[str, float] = {}
    for row in rows:
        if row.frames_per_s is None:
            continue
        base = first.setdefault(row.device, row.frames_per_s)
        row.ratio_to_first = row.frames_per_s / base


def env_table_row(rows: list[TwinScalingRow]) -> TwinSpeed:
    """The env-speed table's twin row: the first CPU size's rate."""
    for row in rows:
        if row.device == "cpu":
            return TwinSpeed(row.status, row.frames_per_s, row.num_envs)
    return TwinSpeed("not measured")


def twin_rows_or_error(config: Any, sizes: tuple[int, ...], **options: Any) -> list[TwinScalingRow]:
    """:func:`measure_twin_scaling`, or one row saying why the twin could not be built (a bench row never aborts the
    bench)."""
    try:
        return measure_twin_scaling(config, sizes, **options)
    except Exception as error:
        return [TwinScalingRow("cpu", sizes[0], f"error: {type(error).__name__}: {error}"[:300])]


def site_name(config: Any) -> str:
    return Path(config.site).stem


def scaling_cells(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the scaling table from rows as dicts (``asdict`` of :class:`TwinScalingRow`, or their
    JSON): one layout for ``bench``'s report and ``gpu-check``'s. The VRAM columns appear when a row has them."""
    vram = any(row.get("peak_reserved_mib") is not None for row in rows)
    header = ["device", "num_envs", "frames/s", "x first size", "torch threads"]
    header += ["peak VRAM allocated / reserved MiB"] if vram else []
    body = []
    for row in rows:
        if row.get("frames_per_s") is None:
            body.append([row["device"], f"{row['num_envs']:,}", row["status"], "-", "-"] + (["-"] if vram else []))
            continue
        cells = [row["device"], f"{row['num_envs']:,}", f"{row['frames_per_s']:,.0f}"]
        cells += [f"{row['ratio_to_first']:.2f}x", str(row["threads"])]
        if vram:
            peaks = (row.get("peak_allocated_mib"), row.get("peak_reserved_mib"))
            cells.append("-" if peaks[1] is None else f"{peaks[0]:,.0f} / {peaks[1]:,.0f}")
        body.append(cells)
    return header, body


SCALING_NOTE = (
    "The training twin (envs/training_twin.py) with the card's problem (configs/base/card.yaml: layout "
    "self_consumption_window, objective tariff, staggered 720-h episodes{years}), stepped by TorchRL's `Collector` "
    "with a random policy on the twin's device, rollouts of {steps} steps stored there and checked once each as "
    "agents/collection.py does; one untimed rollout, then at least {seconds:g} s. *x first size*: frames/s over the "
    "first size's on the same device. No policy network and no update: a fit's collection at its cheapest."
)


def scaling_note(config: Any, seconds: float) -> str:
    seeds = config.training.train_site_seeds
    years = f" over the training years {', '.join(map(str, seeds))}" if seeds else " on the site's own year"
    return SCALING_NOTE.format(years=years, steps=STEPS_PER_ROLLOUT, seconds=seconds)
