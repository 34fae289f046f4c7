"""The measurements of ``gpu-check``, each run in a child process of its own: ``python -m
benchmarks.gpu_check.tasks TASK JSON_ARGS OUT_JSON``.

Why a process each: peak GPU memory (``torch.cuda.max_memory_allocated``) is a high-water mark of the
whole process, the 8 GiB cap (``IQUITOS_GPU_MEMORY_CAP_GIB``) is a per-process allocator setting, and a
compiled or CUDA-graphed update leaves caches and memory pools behind; a fresh process per check keeps
every figure its own. Each task writes one JSON object to ``OUT_JSON``.

Tasks:
- ``profile-fit``: not a task of this module but ``python -m iquitos_lightning fit`` itself (the same
  command, classes, callbacks and auto profile a user gets), with the profile's own sizes but a budget
  of a few rollouts and no evaluation, and :class:`FitProbe` added on the command line; the probe writes
  peak allocated/reserved memory against the agent's own memory estimate (the figure it refuses runs
  with), frames/s and updates/s after the first rollout, and what
  :class:`~iquitos_lightning.callbacks.VRAMMonitor` saw next to torch's counters read at the same moment.
- ``update-cells``: :func:`~benchmarks.gpu_check.update_step.measure_update_step` for one algorithm
  and precision over several switch sets; ``update-groups``: the same for several groups in one process (a CPU run).
- ``oom-ballast``: a real CUDA out-of-memory in the middle of a fit (:class:`Ballast` fills the capped
  device after the first rollout, as another process grabbing memory would) to prove that
  :class:`~iquitos_lightning.callbacks.OutOfMemoryHandler` writes its emergency checkpoint and the
  command exits 3; run as ``fit`` on the command line, so this module only provides the callback.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from benchmarks.gpu_check.update_step import UpdateStepSizes, measure_update_step
from iquitos_lightning.profile.bases import profile_yaml
from iquitos_lightning.profile.hardware import GIB, apply_memory_cap, memory_cap_bytes
from iquitos_lightning.profile.profiles import twin_frames_per_batch


class CountersBesideMonitor(pl.Callback):
    """Torch's own memory counters read at the moment VRAMMonitor read its figures (the callback right after it,
    placed there by :class:`FitProbe`), on the batches the monitor read: whether the monitor reports what torch
    sees, with nothing allocated in between."""

    def __init__(self) -> None:
        self.monitor: Any = None
        self.comparison: dict[str, float] = {}
        self._last_reading: Any = None

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        reading = None if self.monitor is None else self.monitor.latest
        fresh, self._last_reading = reading is not None and reading is not self._last_reading, reading
        if not fresh or pl_module.device.type != "cuda":  # a stale reading (its log interval) says nothing of now
            return
        metrics = reading.metrics
        self.comparison = {
            "monitor_allocated_gb": metrics.get("vram/allocated_gb", math.nan),
            "torch_allocated_gb": torch.cuda.memory_allocated(pl_module.device) / GIB,
            "monitor_reserved_gb": metrics.get("vram/reserved_gb", math.nan),
            "torch_reserved_gb": torch.cuda.memory_reserved(pl_module.device) / GIB,
            "monitor_peak_gb": metrics.get("vram/peak_gb", math.nan),
            "torch_peak_gb": torch.cuda.max_memory_allocated(pl_module.device) / GIB,
        }


class FitProbe(pl.Callback):
    """Frames, updates and time at every rollout; VRAMMonitor's last reading next to torch's own counters; at the
    end of ``fit``, one JSON at ``report_path`` with the peaks, the agent's memory estimate and the rates."""

    def __init__(self, report_path: str, config: str = "", stop_after_s: float | None = None) -> None:
        self.report_path = report_path
        self.config = config
        # gpu-check's device fits: end the fit this long after its first rollout, as one that reached its budget (the
        # budget becomes the frames done), so its final test still runs: a frames/s figure in seconds at any speed
        self.stop_after_s = stop_after_s
        self.stopped_at_frames: int | None = None
        self.marks: list[tuple[float, int, int]] = []
        self.beside_monitor = CountersBesideMonitor()
        self.started = time.perf_counter()
        # Read while training: by ``on_fit_end`` Lightning has moved the module back to the CPU (seen on a GPU)
        self.device: torch.device | None = None
        self.estimate: Any = None

    def setup(self, trainer: pl.Trainer, pl_module: Any, stage: str) -> None:
        """Put :class:`CountersBesideMonitor` right after the VRAMMonitor: read anywhere later (here, say), torch's
        counters include what the callbacks in between allocated (on an H200 an A2C fit's probe read 2 MiB more
        reserved and peak than the monitor had read on the same batch)."""
        monitors = [i for i, callback in enumerate(trainer.callbacks) if type(callback).__name__ == "VRAMMonitor"]
        if monitors and self.beside_monitor not in trainer.callbacks:
            self.beside_monitor.monitor = trainer.callbacks[monitors[0]]
            trainer.callbacks.insert(monitors[0] + 1, self.beside_monitor)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)
        if self.device is None:
            self.device, self.estimate = pl_module.device, pl_module.device_memory_estimate()
        self.marks.append((time.perf_counter(), int(pl_module.frames_done), int(pl_module.updates_done)))
        if self.stop_after_s is not None and self.marks[-1][0] - self.marks[0][0] >= self.stop_after_s:
            # the agent's own hook runs after every callback's and stops the fit at its budget (agents/base.py)
            self.stopped_at_frames = int(pl_module.frames_done)
            pl_module.rollout_config.frame_budget = self.stopped_at_frames

    def rates(self) -> dict[str, float]:
        """Frames/s and updates/s from the end of the first rollout (workers started, compiled) to the last."""
        if len(self.marks) < 2:
            return {"frames_per_s": math.nan, "updates_per_s": math.nan, "timed_rollouts": 0}
        (t0, f0, u0), (t1, f1, u1) = self.marks[0], self.marks[-1]
        seconds = max(t1 - t0, 1e-9)
        rollouts = len(self.marks) - 1
        return {"frames_per_s": (f1 - f0) / seconds, "updates_per_s": (u1 - u0) / seconds, "timed_rollouts": rollouts}

    def on_fit_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        device = self.device or pl_module.device
        cuda = device.type == "cuda"
        estimate = self.estimate or pl_module.device_memory_estimate()
        hparams = dict(pl_module.hparams)
        rollout = hparams.get("rollout") or {}
        frames_per_batch = getattr(rollout, "frames_per_batch", None) or dict(rollout).get("frames_per_batch")
        cap = memory_cap_bytes() if cuda else None
        result = {
            "config": self.config,
            "algorithm": pl_module.algorithm,
            "precision": str(trainer.precision),
            "hidden_sizes": list(hparams.get("hidden_sizes", [])),
            "batch": hparams.get("batch_size") or hparams.get("minibatch_size") or frames_per_batch,
            "frames_per_batch": frames_per_batch,
            "frames_done": int(pl_module.frames_done),
            "stopped_by_time_at_frames": self.stopped_at_frames,
            "cap_gib": cap / GIB if cap else None,
            "peak_allocated_gib": torch.cuda.max_memory_allocated(device) / GIB if cuda else None,
            "peak_reserved_gib": torch.cuda.max_memory_reserved(device) / GIB if cuda else None,
            "estimate_gib": estimate.total / GIB,
            "estimate_parts": estimate.parts(),
            **self.rates(),
            "monitor_vs_torch": self.beside_monitor.comparison,
            "wall_s": time.perf_counter() - self.started,
        }
        Path(self.report_path).write_text(json.dumps(result, indent=2, default=str) + "\n")


class Ballast(pl.Callback):
    """Fills what the device allows after ``after_batches`` rollouts: the next update runs out of memory.

    The OOM drill of ``gpu-check`` adds it on the command line (``--trainer.callbacks+=...``): it is how
    another process taking the memory mid-run looks to this one, and the only way to see the real CUDA
    out-of-memory path of a run whose settings passed the memory check. The allocator's cache is emptied
    first and the device is filled down to its last kilobyte, so even a tiny network's next update fails.
    """

    CHUNK_BYTES = tuple(2**power for power in range(28, 8, -2))  # 256 MiB down to 1 KiB

    def __init__(self, after_batches: int = 1) -> None:
        self.after_batches = after_batches
        self.held: list[torch.Tensor] = []

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if batch_idx + 1 != self.after_batches or pl_module.device.type != "cuda":
            return
        torch.cuda.empty_cache()
        for chunk in self.CHUNK_BYTES:
            while True:
                try:
                    self.held.append(torch.empty(chunk, dtype=torch.uint8, device=pl_module.device))
                except torch.OutOfMemoryError:
                    break


def profile_fit_command(
    config: str,
    rollouts: int,
    workdir: str,
    report_path: str,
    overrides: tuple[str, ...] = (),
    probe_options: dict[str, Any] | None = None,
) -> list[str]:
    """``python -m iquitos_lightning fit`` of ``config`` for ``rollouts`` rollouts, no evaluation, FitProbe added
    (``probe_options``: more of its arguments); ``overrides`` (command-line options) last, and named beside the config
    in the probe's report."""
    model = (profile_yaml(config) or {})["model"]
    frames_per_batch = model["init_args"]["rollout"].get("frames_per_batch")
    if frames_per_batch is None:  # an auto profile picks it on the twin: the value it will pick on this machine
        algorithm = str(model["class_path"]).rsplit(".", 1)[-1].lower()
        frames_per_batch = twin_frames_per_batch(algorithm, torch.cuda.is_available())
    frames_per_batch = int(frames_per_batch)
    budget = frames_per_batch * rollouts
    label = " ".join((config, *overrides))
    probe_args = {"report_path": report_path, "config": label, **(probe_options or {})}
    probe = {"class_path": f"{__name__}.FitProbe", "init_args": probe_args}
    command = [
        sys.executable, "-m", "iquitos_lightning", "fit", "--config", config,
        f"--model.init_args.rollout.frame_budget={budget}",
        "--model.init_args.rollout.eval_episodes=0",
        f"--model.init_args.rollout.eval_every_frames={budget}",
        "--trainer.logger=false",
        "--trainer.enable_progress_bar=false",
        f"--trainer.default_root_dir={workdir}",
        f"--checkpoint.dirpath={workdir}/checkpoints",
        f"--checkpoint.every_n_frames={budget * 10}",
        "--tracking.wandb=false",
        "--final_test.backend=null",  # the card profiles' CityLearn year after fit: minutes, and not what is probed
        f"--trainer.callbacks+={json.dumps(probe)}",
    ]  # fmt: skip
    # one random rollout, then learning (the profile's 8,760 would be all)
    if "init_random_frames" in model["init_args"]:
        command.append(f"--model.init_args.init_random_frames={frames_per_batch}")
    return [*command, *overrides]


def update_cells(
    algorithm: str, precision: str, switch_sets: list[str], accelerator: str, sizes: dict[str, Any]
) -> dict[str, Any]:
    step_sizes = UpdateStepSizes(**{**sizes, "hidden_sizes": tuple(sizes.get("hidden_sizes", (256, 256)))})
    rows = []
    for switches in switch_sets:
        try:
            rows.append(measure_update_step(algorithm, switches, precision, accelerator, step_sizes).as_dict())
        except Exception as error:  # one failing cell must not hide the others: it is reported as failed
            rows.append({"algorithm": algorithm, "switches": switches, "precision": precision, "error": _short(error)})
    return {"rows": rows}


def update_groups(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`update_cells` for each of ``groups`` in turn, their rows together (a CPU run's one child for every
    group: gpu_check.update_jobs)."""
    return {"rows": [row for group in groups for row in update_cells(**group)["rows"]]}


def _short(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip().splitlines()
    return (text[0] if text else type(error).__name__)[:400]


def twin_scaling(
    site: str | None, data_root: str, years: bool, sizes: list[int], cpu_sizes: list[int], seconds: float
) -> dict[str, Any]:
    """The training twin's frames/s against num_envs on the CPU (``cpu_sizes``) and, where there is one, on CUDA under
    the memory cap (:mod:`benchmarks.bench.twin`): rows as dicts, with torch's CPU threads."""
    # lazy: the twin's measurement loads the site and env layers
    from dataclasses import asdict

    from benchmarks.bench.twin import card_env_config, measure_twin_scaling

    apply_memory_cap()
    devices = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)
    config = card_env_config(site, data_root, years=years)
    rows = measure_twin_scaling(config, tuple(sizes), devices=devices, cpu_sizes=tuple(cpu_sizes), seconds=seconds)
    return {
        "site": Path(config.site).stem,
        "years": config.training.train_site_seeds,
        "seconds": seconds,
        "cap_gib": (memory_cap_bytes() or 0) / GIB or None,
        "rows": [asdict(row) for row in rows],
    }


TASKS = {"update-cells": update_cells, "update-groups": update_groups, "twin-scaling": twin_scaling}


def main(argv: list[str] | None = None) -> int:
    task, arguments, out = (sys.argv[1:] if argv is None else argv)[:3]
    result = TASKS[task](**json.loads(arguments))
    Path(out).write_text(json.dumps(result, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
