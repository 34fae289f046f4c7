"""``python -m iquitos_lightning gpu-check``: every CUDA path of the project measured in one command, in minutes.

Why: the product card is about an 8 GB RTX 4060 (16-mixed, VRAM callbacks, profiles that never run
out of memory), yet a GPU is lent to this project rarely and briefly, and users meet the same
situation on cluster nodes. One command, in one process tree, measures what the GPU defaults rest on
and writes ``gpu_check.json`` and ``gpu_check.md`` (a table a person reads) into ``--out``:

1. **device**: what was detected and the auto profile's choice for SAC, PPO and A2C, on the device as
   it is and capped to ``--cap-gib`` (8 GiB: the RTX 4060 stand-in, ``IQUITOS_GPU_MEMORY_CAP_GIB``).
2. **profiles**: a short ``fit`` of every ``*_rtx4060.yaml`` and ``*_auto.yaml`` profile under the cap:
   peak allocated and reserved memory against the agent's own estimate (which must bound them),
   frames/s, updates/s, and VRAMMonitor's logged values against torch's counters.
3. **update step**: SAC, PPO and A2C at Iquitos size in 32-true, 16-mixed and bf16-mixed, eager,
   compiled, CUDA graphs and both: updates/s, finite losses, and the first losses against eager's.
   Compiled cells are first compiled in parallel (filling Inductor's on-disk cache), then every cell
   is timed one at a time, so the timings are not shared with other work.
4. **oom drill**: an oversized setting under the cap must be refused before the run (exit 2), and a
   real CUDA out-of-memory mid-run must leave ``emergency-oom.ckpt`` and exit 3.
5. **buffer**: peak VRAM of SAC with 10k, 100k and 1M replay capacity (the buffer lives in host RAM,
   so VRAM must stay flat).
6. **fits**: whole fits of each ``*_rtx4060.yaml`` as committed, in its alternative settings and as its
   ``*_cpu.yaml``, one at a time after the parallel checks (:mod:`benchmarks.gpu_check.whole_fits`):
   whether the GPU profile trains faster than the CPU profile a user could run instead.
7. **device-twin**: the training twin on the training device (``env.backend.device: training``): its frames/s
   against num_envs on CUDA and the CPU with peak VRAM, then the card's PPO for its whole budget and the other GPU
   profiles for a few seconds each, with that twin: frames/s, wall time, peak VRAM and the trained policy's bill on the
   development year (:mod:`benchmarks.gpu_check.device_twin_check`).

On a machine without CUDA the checks that apply still run (device detection and the profile choice,
the update step on the CPU in 32-true) and the others are reported as skipped, with why.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from rich.progress import Progress

from benchmarks.gpu_check import device_twin_check
from benchmarks.gpu_check.report import markdown_report
from benchmarks.gpu_check.tasks import profile_fit_command
from benchmarks.gpu_check.update_step import largest_relative_difference
from benchmarks.gpu_check.whole_fits import against_cpu, whole_fit_jobs, whole_fit_plan
from iquitos_lightning.agents import A2C, PPO, SAC
from iquitos_lightning.profile.auto_profile import workload_of
from iquitos_lightning.profile.bases import profile_yaml
from iquitos_lightning.profile.hardware import GIB, MEMORY_CAP_ENV, detect_device
from iquitos_lightning.profile.memory_budget import InsufficientMemory
from iquitos_lightning.profile.profiles import choose_profile

# 16-mixed first: the card's precision on CUDA, timed first when --deadline-s may cut the timed stage short
PRECISIONS = ("16-mixed", "32-true", "bf16-mixed")
SWITCH_SETS = ("eager", "compile", "cuda_graphs", "compile+cuda_graphs")
ALGORITHMS = ("sac", "ppo", "a2c")
AGENT_CLASSES = {"sac": SAC, "ppo": PPO, "a2c": A2C}
PROFILE_GLOBS = ("*_rtx4060.yaml", "*_auto.yaml")
BUFFER_CAPACITIES = (10_000, 100_000, 1_000_000)
VERSIONED = ("torch", "lightning", "torchrl", "tensordict", "citylearn", "gymnasium", "numpy", "jsonargparse")
# Tolerances of "matches eager": the first rollout's mean losses at the same seed. Compilation reorders float
# sums (tiny differences); half precisions round activations, so their tolerance is wider.
MATCH_TOLERANCE = {"32-true": 1e-3, "16-mixed": 2e-2, "bf16-mixed": 5e-2}
ROLLOUTS_PER_PROFILE_FIT = 2  # the first starts workers (and compiles); the second is timed
CHECKS = ("profiles", "oom", "buffer", "fits", "device-twin", "update")  # what --only chooses from
LEAST_SECONDS_TO_START = 30  # with --deadline-s, a check is not started with less time left than this


@dataclass
class CheckRun:
    """Options and collected results of one gpu-check."""

    out: Path
    cap_gib: float
    jobs: int
    quick: bool
    cuda: bool
    deadline_s: float | None = None
    only: frozenset[str] = frozenset(CHECKS)  # --only: the checks to run (device detection always runs)
    precisions: tuple[str, ...] = PRECISIONS  # --precisions: the update step's precisions to time
    # --device-fits: which card profiles device-twin fits (None: all); --device-table: whether it times the twin alone
    device_fits: tuple[str, ...] | None = None
    device_table: bool = True
    started: float = field(default_factory=time.perf_counter)

    def seconds_left(self) -> float:
        """Until ``--deadline-s`` (infinite without one): lent GPU time is short, a partial report beats none."""
        if self.deadline_s is None:
            return float("inf")
        return self.deadline_s - (time.perf_counter() - self.started)

    def timeout(self, default_s: int) -> int:
        """A child's timeout: its own limit, cut to what is left before the deadline."""
        return int(max(1.0, min(default_s, self.seconds_left())))

    def child_env(self, capped: bool = True) -> dict[str, str]:
        env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
        if capped and self.cuda:
            env[MEMORY_CAP_ENV] = str(self.cap_gib)
        return env


def run_child(run: CheckRun, task: str, arguments: dict[str, Any], name: str, timeout_s: int) -> dict[str, Any]:
    """One :mod:`benchmarks.gpu_check.tasks` task in its own process; its JSON, or why it failed."""
    raw = run.out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    result_file = raw / f"{name}.json"
    command = [sys.executable, "-m", "benchmarks.gpu_check.tasks", task, json.dumps(arguments)]
    return _run_and_read(
        [*command, str(result_file)], result_file, raw / f"{name}.log", run.child_env(), run.timeout(timeout_s)
    )


def _run_and_read(command: list[str], result_file: Path, log: Path, env: dict[str, str], timeout_s: int) -> dict:
    started = time.perf_counter()
    try:
        with log.open("w") as log_file:
            completed = subprocess.run(command, stdout=log_file, stderr=subprocess.STDOUT, env=env, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s} s (log: {log})"}
    if completed.returncode != 0 or not result_file.exists():
        return {"error": f"exit status {completed.returncode}: {_last_line(log)} (log: {log})"}
    result = json.loads(result_file.read_text())
    result.setdefault("wall_s", time.perf_counter() - started)
    return result


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line or line.startswith("error:")]
    return (errors or lines or ["no output"])[-1][:300]


# ----- 1. device and auto profile ---------------------------------------------------------------------------------
def check_device(run: CheckRun) -> dict[str, Any]:
    """Detection and the auto profile's choice, on the device as it is and (CUDA) capped to ``cap_gib``."""
    views = {"as is": None}
    if run.cuda:
        views[f"capped to {run.cap_gib:g} GiB"] = str(run.cap_gib)
    result: dict[str, Any] = {"views": {}}
    workloads = {}
    for algorithm in ALGORITHMS:
        model_args = profile_yaml(f"configs/{algorithm}_auto.yaml")["model"]["init_args"]
        if run.quick:  # the tiny site builds in a second; the choice's logic is the same at any size
            env = model_args["env"]
            env |= {"site": "configs/site/tiny.yaml", "backend": {**env.get("backend", {}), "num_workers": 1}}
        workloads[algorithm] = workload_of(model_args, AGENT_CLASSES[algorithm])
    for view, cap in views.items():
        previous = os.environ.pop(MEMORY_CAP_ENV, None)
        if cap is not None:
            os.environ[MEMORY_CAP_ENV] = cap
        try:
            device = detect_device()
        finally:
            os.environ.pop(MEMORY_CAP_ENV, None)
            if previous is not None:
                os.environ[MEMORY_CAP_ENV] = previous
        choices = {}
        for algorithm in ALGORITHMS:
            try:
                choice = choose_profile(device, algorithm, {}, workloads[algorithm])
                choices[algorithm] = {
                    "class": choice.profile_class,
                    "settings": {setting.key: setting.value for setting in choice.settings},
                    "estimate_gib": choice.device_memory.total / GIB,
                }
            except InsufficientMemory as error:
                choices[algorithm] = {"refused": str(error)}
        result["views"][view] = {
            "device": {
                "accelerator": device.accelerator,
                "name": device.name,
                "total_gib": device.total_memory_bytes / GIB,
                "free_gib": device.free_memory_bytes / GIB,
                "compute_capability": device.compute_capability,
                "cpu_cores": device.cpu_cores,
            },
            "choices": choices,
        }
    return result


# ----- 2. profiles under the cap ----------------------------------------------------------------------------------
def profile_configs() -> list[str]:
    return sorted(str(path) for pattern in PROFILE_GLOBS for path in Path("configs").glob(pattern))


def profile_fit_jobs(run: CheckRun) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    """One ``python -m iquitos_lightning fit`` per profile, under the cap, with FitProbe writing its figures."""
    raw = run.out / "raw"

    def fit(config: str, name: str, overrides: tuple[str, ...]) -> dict[str, Any]:
        raw.mkdir(parents=True, exist_ok=True)
        result_file = raw / f"{name}.json"
        with tempfile.TemporaryDirectory(prefix=f"gpu-check-{Path(config).stem}-") as workdir:  # scratch checkpoints
            command = profile_fit_command(config, ROLLOUTS_PER_PROFILE_FIT, workdir, str(result_file), overrides)
            return _run_and_read(command, result_file, raw / f"{name}.log", run.child_env(), run.timeout(420))

    fits = [(f"profile-{Path(config).stem}", config) for config in profile_configs()]
    return [(name, lambda c=config, n=name: fit(c, n, ())) for name, config in fits]


def gpu_profile_fits(run: CheckRun, configs: list[str] | None = None) -> list[dict[str, Any]]:
    """Whole fits of the card's GPU profiles (``configs``: the ``*_rtx4060.yaml`` profiles unless given) and their
    CPU profiles, one at a time (timed); ``--quick``: the first profile's committed fit and its CPU profile's."""
    raw = run.out / "raw"

    def fit(planned: dict[str, Any], rollouts: int, workdir: str) -> dict[str, Any]:
        if not planned.get("cpu") and not run.cuda:  # what the fit would refuse, ~7 s of a child's imports later
            return {"error": f"{planned['config']} trains on a GPU: no CUDA device on this machine"}
        raw.mkdir(parents=True, exist_ok=True)
        result_file = raw / f"{planned['name']}.json"
        command = profile_fit_command(planned["config"], rollouts, workdir, str(result_file), planned["overrides"])
        env = run.child_env(capped=not planned.get("cpu"))
        return _run_and_read(command, result_file, raw / f"{planned['name']}.log", env, run.timeout(300))

    if configs is None:
        configs = sorted(str(path) for path in Path("configs").glob("*_rtx4060.yaml"))
    plan = whole_fit_plan(configs)
    if run.quick:
        plan = [fit for fit in plan if fit["profile"] == plan[0]["profile"] and (fit["cpu"] or not fit["overrides"])]
    return against_cpu(plan, run_sequential(whole_fit_jobs(plan, fit), run))


def judge_profile(row: dict[str, Any], cap_gib: float) -> dict[str, Any]:
    """Whether the measured peak stayed under the estimate and under the cap."""
    if "error" in row or row.get("peak_reserved_gib") is None:
        return row
    peak = max(row["peak_allocated_gib"], row["peak_reserved_gib"])
    row["under_estimate"] = peak <= row["estimate_gib"]
    row["under_cap"] = peak <= cap_gib
    monitor = row.get("monitor_vs_torch") or {}
    row["monitor_matches_torch"] = bool(monitor) and all(
        abs(monitor[f"monitor_{key}_gb"] - monitor[f"torch_{key}_gb"]) <= 1e-3 for key in ("allocated", "reserved")
    )
    return row


# ----- 3. update step -------------------------------------------------------------------------------------------
def update_sizes(run: CheckRun) -> dict[str, Any]:
    if run.quick:
        return {"hidden_sizes": [32, 32], "batch_size": 32, "sac_frames": 16, "onpolicy_frames": 64, "warmup": 1,
                "rollouts": 2}  # fmt: skip
    return {"hidden_sizes": [256, 256], "batch_size": 256, "sac_frames": 100, "onpolicy_frames": 1024, "warmup": 2,
            "rollouts": 3}  # fmt: skip


def update_grid(run: CheckRun) -> list[tuple[str, str, list[str]]]:
    """(algorithm, precision, switch sets) groups to time; on a CPU only 32-true eager (and compile unless quick)."""
    if not run.cuda:
        switch_sets = ["eager"] if run.quick else ["eager", "compile"]
        return [(algorithm, "32-true", switch_sets) for algorithm in ALGORITHMS]
    groups = []
    for precision in run.precisions:
        for algorithm in ALGORITHMS:
            # 16-mixed's GradScaler reads the host every step: CUDA graphs cannot capture it (agents/speed.py)
            sets = [s for s in SWITCH_SETS if not (precision == "16-mixed" and "cuda_graphs" in s)]
            groups.append((algorithm, precision, sets))
    return groups


def update_jobs(run: CheckRun, compiled_only: bool, tag: str) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    """A child process per (algorithm, precision) group on CUDA (each group's device memory and compiled graphs its
    own); on a CPU one child times every group, one after another: there is no device memory to keep apart, and each
    child's start is ~7 s of imports on the 2-core machine."""
    accelerator = "gpu" if run.cuda else "cpu"
    groups = []
    for algorithm, precision, sets in update_grid(run):
        chosen = [s for s in sets if "compile" in s] if compiled_only else sets
        if chosen:
            groups.append((f"{tag}-{algorithm}-{precision}", {"algorithm": algorithm, "precision": precision,
                           "switch_sets": chosen, "accelerator": accelerator, "sizes": update_sizes(run)}))  # fmt: skip
    task = "update-cells"
    if not run.cuda and groups:
        task, groups = "update-groups", [(f"{tag}-cpu", {"groups": [arguments for _, arguments in groups]})]
    return [
        (name, lambda name=name, arguments=arguments: run_child(run, task, arguments, name, 480))
        for name, arguments in groups
    ]


def judge_update_rows(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flatten the groups' rows and compare each cell's first losses with eager's at the same precision."""
    rows = [row for group in groups for row in group.get("rows", [])]
    eager = {(row["algorithm"], row["precision"]): row for row in rows if row.get("switches") == "eager"}
    for row in rows:
        reference = eager.get((row["algorithm"], row["precision"]))
        if "error" in row or reference is None or "error" in reference:
            continue
        difference = largest_relative_difference(row["first_losses"], reference["first_losses"])
        row["difference_to_eager"] = difference
        row["matches_eager"] = difference <= MATCH_TOLERANCE.get(row["precision"], 1e-3)
    return rows


def fastest_matching(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per algorithm, the fastest cell whose losses are finite and match eager (the evidence for the defaults)."""
    best: dict[str, dict[str, Any]] = {}
    for row in rows:
        if "error" in row or not row.get("losses_finite") or not row.get("matches_eager", row["switches"] == "eager"):
            continue
        current = best.get(row["algorithm"])
        if current is None or row["updates_per_s"] > current["updates_per_s"]:
            best[row["algorithm"]] = row
    return best


# ----- 4. OOM drill -----------------------------------------------------------------------------------------------
def oom_jobs(run: CheckRun) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    raw = run.out / "raw"
    workdir = Path(tempfile.mkdtemp(prefix="gpu-check-oom-"))
    common = ["--trainer.logger=false", "--trainer.enable_progress_bar=false", "--tracking.wandb=false",
              "--model.init_args.rollout.eval_episodes=0", f"--trainer.default_root_dir={workdir}"]  # fmt: skip
    oversized = [sys.executable, "-m", "iquitos_lightning", "fit", "--config", "configs/sac_rtx4060.yaml",
                 "--profile", "auto", "--model.init_args.hidden_sizes=[16384,16384]",
                 "--model.init_args.batch_size=65536", *common]  # fmt: skip
    ballast = [sys.executable, "-m", "iquitos_lightning", "fit", "--config", "configs/smoke.yaml",
               "--trainer.accelerator=gpu", "--trainer.callbacks+=benchmarks.gpu_check.tasks.Ballast",
               f"--checkpoint.dirpath={workdir}/checkpoints", *common]  # fmt: skip

    def drill(name: str, command: list[str], expected: int, checkpoint: Path | None) -> dict[str, Any]:
        started = time.perf_counter()
        log = raw / f"{name}.log"
        raw.mkdir(parents=True, exist_ok=True)
        try:
            with log.open("w") as log_file:
                completed = subprocess.run(command, stdout=log_file, stderr=subprocess.STDOUT, env=run.child_env(),
                                           timeout=run.timeout(300), check=False)  # fmt: skip
        except subprocess.TimeoutExpired:
            return {"error": f"timed out (log: {log})", "passed": False}
        text = log.read_text(errors="replace")
        error_lines = [line for line in text.splitlines() if line.startswith("error:") or "out of memory" in line]
        return {
            "command": " ".join(command[1:]),
            "exit_status": completed.returncode,
            "expected_exit_status": expected,
            "emergency_checkpoint": None if checkpoint is None else checkpoint.exists(),
            "passed": completed.returncode == expected and (checkpoint is None or checkpoint.exists()),
            "message": (error_lines or ["(no error line)"])[0][:300],
            "wall_s": time.perf_counter() - started,
        }

    emergency = workdir / "checkpoints" / "emergency-oom.ckpt"
    return [
        ("oom-refused", lambda: drill("oom-refused", oversized, 2, None)),
        ("oom-ballast", lambda: drill("oom-ballast", ballast, 3, emergency)),
    ]


# ----- 5. replay buffer off the GPU ------------------------------------------------------------------------------
def buffer_jobs(run: CheckRun) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    raw = run.out / "raw"

    def probe(capacity: int) -> dict[str, Any]:
        raw.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "benchmarks.bench.memory", "--site", "configs/site/iquitos-2026.yaml",
                   "--capacity", str(capacity), "--storage", "memory", "--frames", "200"]  # fmt: skip
        log = raw / f"buffer-{capacity}.log"
        with log.open("w") as log_file:
            completed = subprocess.run(command, stdout=subprocess.PIPE, stderr=log_file, text=True,
                                       env=run.child_env(), timeout=run.timeout(420), check=False)  # fmt: skip
        if completed.returncode != 0:
            return {"capacity": capacity, "error": f"exit status {completed.returncode}: {_last_line(log)}"}
        return {"capacity": capacity, **json.loads(completed.stdout.strip().splitlines()[-1])}

    return [(f"buffer-{capacity}", lambda capacity=capacity: probe(capacity)) for capacity in BUFFER_CAPACITIES]


# ----- 7. the twin on the training device -------------------------------------------------------------------------
def device_twin(run: CheckRun) -> dict[str, Any]:
    """The training twin's frames/s against num_envs (CUDA under the cap, and the CPU), then the card profiles' fits
    with the twin on the training device, one at a time (:mod:`benchmarks.gpu_check.device_twin_check`)."""
    arguments = device_twin_check.twin_arguments(run.quick, run.cuda)
    if run.device_table:
        twin = run_child(run, "twin-scaling", arguments, "device-twin-scaling", device_twin_check.TWIN_TIMEOUT_S)
    else:
        twin = skipped("left out by --device-table off")
    if not run.cuda:
        fits: Any = skipped(
            "the GPU profiles' fits with the twin on the GPU need a CUDA device (this machine has none)"
        )
    else:
        plan = device_twin_check.fit_plan()
        if run.quick:
            plan = [{**plan[1], "stop_after_s": device_twin_check.QUICK_FIT_SECONDS}]  # one capped fit: a smoke run
        elif run.device_fits is not None:  # a loan split over calls: each call fits some of the profiles
            plan = [planned for planned in plan if planned["profile"] in run.device_fits]

        def child(command: list[str], result_file: Path, log: Path, timeout_s: int) -> dict[str, Any]:
            return _run_and_read(command, result_file, log, run.child_env(), run.timeout(timeout_s))

        jobs = [(planned["profile"], lambda p=planned: device_twin_check.run_fit(p, run.out / "raw", child))
                for planned in plan]  # fmt: skip
        results = run_sequential(jobs, run)
        fits = [{"profile": planned["profile"], **results.get(planned["profile"], {"error": "not run"})}
                for planned in plan]  # fmt: skip
    return {"twin": twin, "fits": fits, "verdict": device_twin_check.judge(twin, fits)}


# ----- orchestration ----------------------------------------------------------------------------------------------
def run_parallel(
    jobs: list[tuple[str, Callable[[], dict[str, Any]]]], workers: int, run: CheckRun
) -> dict[str, dict[str, Any]]:
    """Every job, ``workers`` at once; one started too close to the deadline is reported skipped, not run."""
    results: dict[str, dict[str, Any]] = {}

    def unless_late(job: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        if run.seconds_left() < LEAST_SECONDS_TO_START:
            return {"error": f"not started: --deadline-s {run.deadline_s:g} reached", "skipped": True}
        return job()

    with Progress(transient=False) as progress, ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        task = progress.add_task(f"{len(jobs)} checks, {workers} at once", total=len(jobs))
        futures = {name: pool.submit(unless_late, job) for name, job in jobs}
        for name, future in futures.items():
            try:
                results[name] = future.result()
            except Exception as error:  # a broken check is reported, the others still run
                results[name] = {"error": f"{type(error).__name__}: {error}"[:400]}
            progress.advance(task)
    return results


def run_sequential(jobs: list[tuple[str, Callable[[], dict[str, Any]]]], run: CheckRun) -> dict[str, dict[str, Any]]:
    return run_parallel(jobs, 1, run)


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    found["cuda"] = torch.version.cuda
    return found


def skipped(why: str) -> dict[str, str]:
    return {"skipped": why}


def run_checks(run: CheckRun) -> dict[str, Any]:
    """Every section, in the order that keeps timings clean: parallel work first, then the timed update cells."""
    report: dict[str, Any] = {"versions": versions(), "cap_gib": run.cap_gib, "quick": run.quick}
    if run.cuda:
        report["gpu"] = torch.cuda.get_device_name(0)
    report["device"] = check_device(run)

    no_cuda = "needs a CUDA device (this machine has none)"
    left_out = "left out by --only"
    if run.cuda:
        chosen = {"profiles": profile_fit_jobs(run), "oom": oom_jobs(run), "buffer": buffer_jobs(run),
                  "update": update_jobs(run, True, "warm")}  # fmt: skip
        if run.quick:
            chosen = {"profiles": chosen["profiles"][:1], "oom": chosen["oom"]}
        parallel = [job for check, jobs in chosen.items() if check in run.only for job in jobs]
        results = run_parallel(parallel, run.jobs, run)
        report["profiles"] = [
            judge_profile({"name": name, **row}, run.cap_gib)
            for name, row in results.items()
            if name.startswith("profile-")
        ]
        report["oom_drill"] = {name: row for name, row in results.items() if name.startswith("oom-")}
        buffer_rows = [row for name, row in results.items() if name.startswith("buffer-")]
        report["buffer"] = (
            {"rows": buffer_rows, "vram_flat": _vram_flat(buffer_rows)}
            if buffer_rows
            else skipped("left out by --quick" if run.quick else left_out)
        )
        if "profiles" not in run.only:
            report["profiles"] = skipped(left_out)
        if "oom" not in run.only:
            report["oom_drill"] = skipped(left_out)
        warmups = {name: row for name, row in results.items() if name.startswith("warm-")}
        report["compile_warmup"] = {name: row.get("error", "ok") for name, row in warmups.items()}
    else:
        report["profiles"] = skipped(f"the profiles' fits measure VRAM under the {run.cap_gib:g} GiB cap: {no_cuda}")
        report["oom_drill"] = skipped(f"a CUDA out-of-memory drill {no_cuda}")
        report["buffer"] = skipped(f"VRAM against replay capacity {no_cuda}")
    if run.cuda and "fits" in run.only:
        report["whole_fits"] = gpu_profile_fits(run)
    else:
        report["whole_fits"] = skipped(left_out if run.cuda else f"a GPU profile against the CPU {no_cuda}")
    report["device_twin"] = device_twin(run) if "device-twin" in run.only else skipped(left_out)
    groups = run_sequential(update_jobs(run, False, "timed") if "update" in run.only else [], run)
    rows = judge_update_rows(list(groups.values()))
    not_run = [] if run.cuda else ["16-mixed, bf16-mixed, cuda_graphs: " + no_cuda]
    if "update" not in run.only:
        not_run.append(f"the update step: {left_out}")
    not_run += [f"{name.removeprefix('timed-')}: {group['error']}" for name, group in groups.items()
                if "rows" not in group]  # fmt: skip
    report["update_step"] = {
        "sizes": update_sizes(run),
        "rows": rows,
        "fastest_matching": fastest_matching(rows),
        "not_run": not_run,
    }
    report["wall_s"] = time.perf_counter() - run.started
    return report


def _vram_flat(rows: list[dict[str, Any]]) -> bool | None:
    peaks = [row.get("peak_vram_mib") for row in rows if "error" not in row]
    if len(peaks) < 2 or any(peak is None for peak in peaks):
        return None
    return max(peaks) - min(peaks) <= max(32.0, 0.05 * max(peaks))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iquitos_lightning gpu-check", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/gpu-check"), help="where the JSON and table go")
    parser.add_argument("--cap-gib", type=float, default=8.0, help="GPU memory cap standing in for the RTX 4060")
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1), help="checks run at once")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and one profile: a smoke run of the command")
    parser.add_argument("--only", nargs="+", choices=CHECKS, default=list(CHECKS),
                        help="the checks to run (device detection always runs), e.g. --only update")  # fmt: skip
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS),
                        help="the update step's precisions to time")  # fmt: skip
    parser.add_argument("--deadline-s", type=float, default=None,
                        help="start no check after this many seconds and cut running ones there; the report says "
                        "what was not run (for a GPU lent by the minute)")  # fmt: skip
    profiles = [Path(config).stem for config, _ in device_twin_check.DEVICE_FITS]
    parser.add_argument("--device-fits", nargs="*", choices=profiles, default=None,
                        help="device-twin: fit only these profiles (none: the twin's table alone)")  # fmt: skip
    parser.add_argument("--device-table", choices=("on", "off"), default="on",
                        help="device-twin: time the twin alone against num_envs (off: the fits alone)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.deadline_s is not None and args.deadline_s <= 0:
        parser.error(f"--deadline-s must be positive, got {args.deadline_s:g}")
    args.out.mkdir(parents=True, exist_ok=True)
    run = CheckRun(out=args.out, cap_gib=args.cap_gib, jobs=args.jobs, quick=args.quick, cuda=torch.cuda.is_available(),
                   deadline_s=args.deadline_s, only=frozenset(args.only),
                   precisions=tuple(args.precisions),
                   device_fits=None if args.device_fits is None else tuple(args.device_fits),
                   device_table=args.device_table == "on")  # fmt: skip
    report = run_checks(run)
    (args.out / "gpu_check.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    table = markdown_report(report)
    (args.out / "gpu_check.md").write_text(table)
    print(table)
    print(f"gpu-check: {args.out / 'gpu_check.md'} and gpu_check.json written in {report['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
