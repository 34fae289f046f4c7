"""``gpu-check --only device-twin``: the twin on the training device, measured in one command of about six minutes.

Why: with ``env.backend.device: training`` the twin steps on the GPU the agent trains on (envs/twin.py), so a card
profile's collection no longer runs on the host's cores and its batch of envs can grow by orders of magnitude. Two
questions decide whether the GPU profiles should use it, and only a GPU answers them:

1. **The twin alone**: the training twin's frames/s against ``num_envs`` on CUDA (64 ... 16,384, or up to what fits
   under the 8 GiB cap) beside the same twin on the machine's CPU, with each size's peak VRAM (bench/twin.py, one
   child process under the cap).
2. **Whole fits**: the card's ``ppo_rtx4060`` for the card's whole PPO budget (8,388,608 frames,
   configs/base/ppo.yaml; the goal: about a minute at >= 150,000 frames/s), then ``a2c_rtx4060``, ``sac_rtx4060`` and
   ``ppo_auto`` each stopped :data:`CAPPED_SECONDS` after its first rollout (enough for a stable frames/s), every one
   with ``env.backend.device training`` given on the command line (it wins over the profile either way), no evaluation
   during the fit (``--trainer.limit_val_batches 0``) and its final test on the twin over the development year (the
   site's own, never trained on): frames/s, wall time, peak VRAM and the trained policy's bill. One fit at a time,
   each in its own process with a timeout, so the timings are clean and one failure loses only its row.

On a machine without CUDA the twin's table runs on the CPU and the fits are reported skipped: the GPU profiles refuse
to run without a GPU. ``--quick`` times the tiny site's twin at two small sizes for a fraction of a second each and,
on CUDA, one capped fit (``a2c_rtx4060``) for :data:`QUICK_FIT_SECONDS`: a smoke run of the path.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.gpu_check.tasks import profile_fit_command
from iquitos_lightning.profile.bases import profile_yaml

SIZES = (64, 256, 1024, 4096, 16384)  # CUDA
CPU_SIZES = (64, 256, 1024, 4096)  # the CPU for comparison (16,384 would take as long as the four others)
QUICK_SIZES = (4, 16)  # the tiny site, without CUDA: proves the path runs, measures nothing
TWIN_SECONDS, QUICK_TWIN_SECONDS = 2.0, 0.2
TWIN_TIMEOUT_S = 180
WHOLE_PPO_BUDGET = 8_388_608  # the card's PPO budget (configs/base/ppo.yaml), of which ppo_rtx4060 runs 4x
# The PPO fit is stopped after this long even short of its budget (a slow twin must not eat the loan): the row says so
WHOLE_FIT_MAX_S = 150.0
QUICK_FIT_SECONDS = 5.0
CAPPED_SECONDS = 12.0  # the other fits: timed this long after their first rollout (CUDA graphs captured by then)
# Each fit's process: setup (imports, site years, start peaks: ~30 s), its first rollout, the timed window and the
# final test (one year on the twin: ~30 s on an H100 machine)
FIT_TIMEOUT_S = {"whole": int(WHOLE_FIT_MAX_S) + 120, "capped": int(CAPPED_SECONDS) + 110}
DEVICE_FITS = (  # (config, "whole" or "capped"), in the order they run
    ("configs/ppo_rtx4060.yaml", "whole"),
    ("configs/a2c_rtx4060.yaml", "capped"),
    ("configs/sac_rtx4060.yaml", "capped"),
    ("configs/ppo_auto.yaml", "capped"),
)
ON_THE_DEVICE = (
    "--model.init_args.env.backend.device=training",
    "--model.init_args.rollout.eval_episodes=1",  # the final test's one year (evaluation during the fit is off:)
    "--trainer.limit_val_batches=0",
    "--final_test.backend=twin",
    "--final_test.policy=final",
)
CAPPED_ROLLOUTS = 100_000  # a budget no capped fit reaches before its time stop


def twin_arguments(quick: bool, cuda: bool) -> dict[str, Any]:
    """The twin task's arguments: the card's site and years at :data:`SIZES` (CUDA) or :data:`CPU_SIZES`, or with
    ``quick`` the tiny site at two small sizes (a smoke run of the path on any machine)."""
    if quick:
        sizes = list(QUICK_SIZES)
        return {"site": "configs/site/tiny.yaml", "data_root": "data", "years": False, "sizes": sizes,
                "cpu_sizes": sizes, "seconds": QUICK_TWIN_SECONDS}  # fmt: skip
    sizes = list(SIZES if cuda else CPU_SIZES)
    return {"site": None, "data_root": "data", "years": True, "sizes": sizes, "cpu_sizes": list(CPU_SIZES),
            "seconds": TWIN_SECONDS}  # fmt: skip


def fit_plan(configs: tuple[tuple[str, str], ...] = DEVICE_FITS) -> list[dict[str, Any]]:
    """Per profile: its name, the rollouts of its budget, its overrides and the FitProbe's time stop."""
    plan = []
    for config, kind in configs:
        frames_per_batch = int(profile_yaml(config)["model"]["init_args"]["rollout"].get("frames_per_batch", 1))
        whole = kind == "whole"
        rollouts = math.ceil(WHOLE_PPO_BUDGET / frames_per_batch) if whole else CAPPED_ROLLOUTS
        plan.append(
            {
                "profile": Path(config).stem,
                "config": config,
                "kind": kind,
                "budget": rollouts * frames_per_batch if whole else None,
                "rollouts": rollouts,
                "stop_after_s": WHOLE_FIT_MAX_S if whole else CAPPED_SECONDS,
                "overrides": ON_THE_DEVICE,
                "timeout_s": FIT_TIMEOUT_S[kind],
            }
        )
    return plan


def fit_command(planned: dict[str, Any], workdir: str, report_path: str) -> list[str]:
    """``fit`` of a planned profile through the project's CLI, the probe stopping it by time."""
    probe = {"stop_after_s": planned["stop_after_s"]}
    return profile_fit_command(
        planned["config"], planned["rollouts"], workdir, report_path, planned["overrides"], probe_options=probe
    )


def tested_bill(workdir: Path) -> dict[str, Any]:
    """The final test's KPI row (``kpis.json``, training/callbacks/report.py) under the fit's folder: its bill."""
    found = [workdir / "kpis.json"] if (workdir / "kpis.json").exists() else sorted(workdir.rglob("test-*/kpis.json"))
    if not found:
        return {"bill_error": "no kpis.json: the final test did not run (see the log)"}
    row = json.loads(found[0].read_text())
    return {
        "bill_pen": row.get("tariff_cost"),
        "demand_charge_pen": row.get("demand_charge"),
        "test_episode_return": row.get("episode_return"),
    }


def run_fit(planned: dict[str, Any], raw: Path, run_child: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """One planned fit in its own process (``run_child(command, result_file, log, timeout_s)``: gpu_check's runner),
    its probe's figures, its wall time and the bill its final test wrote."""
    raw.mkdir(parents=True, exist_ok=True)
    name = f"device-fit-{planned['profile']}"
    result_file = raw / f"{name}.json"
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"gpu-check-{name}-") as workdir:  # checkpoints and report: scratch
        command = fit_command(planned, workdir, str(result_file))
        result = run_child(command, result_file, raw / f"{name}.log", planned["timeout_s"])
        bill = tested_bill(Path(workdir)) if "error" not in result else {}
    row = {key: planned[key] for key in ("profile", "config", "kind", "budget", "stop_after_s")}
    row |= {"overrides": list(planned["overrides"]), **result, **bill}
    row["process_wall_s"] = time.perf_counter() - started
    frames, fit_s = row.get("frames_done"), row.get("wall_s")
    row["frames_per_fit_s"] = frames / fit_s if frames and fit_s else None  # setup and first rollout included
    return row


def judge(twin: dict[str, Any], fits: list[dict[str, Any]] | dict[str, Any]) -> dict[str, Any]:
    """The section's verdicts: the largest CUDA size that fit under the cap, the fastest CUDA row over the 64-env
    CUDA row and over the fastest CPU row, and whether the whole PPO fit met its goal (>= 150,000 frames/s)."""
    rows = [row for row in twin.get("rows", []) if row.get("frames_per_s")]
    cuda = [row for row in rows if row["device"].startswith("cuda")]
    cpu = [row for row in rows if row["device"] == "cpu"]
    verdict: dict[str, Any] = {}
    if cuda:
        best = max(cuda, key=lambda row: row["frames_per_s"])
        verdict["largest_cuda_num_envs"] = max(row["num_envs"] for row in cuda)
        verdict["fastest_cuda"] = {"num_envs": best["num_envs"], "frames_per_s": best["frames_per_s"]}
        if cpu:
            verdict["fastest_cuda_over_fastest_cpu"] = best["frames_per_s"] / max(row["frames_per_s"] for row in cpu)
    if isinstance(fits, list):
        for row in fits:
            if row.get("kind") == "whole" and row.get("frames_per_s"):
                verdict["whole_ppo_frames_per_s"] = row["frames_per_s"]
                verdict["whole_ppo_goal_met"] = row["frames_per_s"] >= 150_000 and not row.get(
                    "stopped_by_time_at_frames"
                )
    return verdict
