"""``gpu-check``'s whole fits: each card GPU profile against its CPU profile on the same machine, one fit at a time.

Why: the short profile fits (two rollouts, a dozen at once) prove memory, not speed, and the update step alone
misses collection. On an H100 the card's SAC profile in 16-mixed eager trained at 358 frames/s, slower than a
2-core CPU, and at 2,257 in bf16-mixed with CUDA graphs (results/gpu-check/2026-11-26-h100): only whole fits, each
alone on the machine, showed it. A GPU profile is worth its name only where it beats the CPU profile a user could
run instead, so every loan measures, per ``*_rtx4060.yaml``: the profile as committed, the alternatives below, and
the matching ``*_cpu.yaml`` (its own settings, ``--trainer.accelerator cpu``), for the same number of frames.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iquitos_lightning.profile.bases import profile_yaml
from iquitos_lightning.profile.devices import cpu_profile_for

# The other settings a GPU profile is timed in beside itself: the one it replaced (SAC and PPO trained in 16-mixed
# eager until whole fits on an H100 measured bf16-mixed + CUDA graphs 6.3x and 2.6x faster); A2C makes one update a
# rollout (measured collection-bound: 0.97x its CPU profile), so nothing else is timed for it.
EAGER_16_MIXED = ("--trainer.precision=16-mixed", "--model.init_args.speed.cuda_graphs=false")
GPU_ALTERNATIVES: dict[str, dict[str, tuple[str, ...]]] = {
    "sac_rtx4060": {"16-mixed eager": EAGER_16_MIXED},
    "ppo_rtx4060": {"16-mixed eager": EAGER_16_MIXED},
    "a2c_rtx4060": {},
}
# Timed in this order, so a deadline cuts what comes last: the CPU profile of SAC (the slowest fits) was cut on the
# fourth loan (results/gpu-check/2026-11-26-h100-fits).
FIRST = ("ppo_rtx4060", "a2c_rtx4060", "sac_rtx4060")
TIMED_FRAMES = 10_240  # at least this many frames after the first rollout (which starts workers, compiles, warms up)
LEAST_TIMED_ROLLOUTS = 3
CPU_OVERRIDES = ("--trainer.accelerator=cpu",)


def rollouts_for(config: str) -> int:
    """Rollouts of a whole fit of ``config``: the first (not timed), then enough for ``TIMED_FRAMES``."""
    rollout = profile_yaml(config)["model"]["init_args"]["rollout"]
    frames_per_batch = int(rollout["frames_per_batch"])
    return 1 + max(LEAST_TIMED_ROLLOUTS, math.ceil(TIMED_FRAMES / frames_per_batch))


def whole_fit_plan(configs: list[str]) -> list[dict[str, Any]]:
    """Per GPU profile: the fits to time, in order (as committed, alternatives, the CPU profile)."""
    plan = []
    for config in sorted(configs, key=lambda name: (FIRST + (Path(name).stem,)).index(Path(name).stem)):
        stem = Path(config).stem
        fits = [{"variant": "as committed", "config": config, "overrides": (), "cpu": False}]
        for variant, overrides in GPU_ALTERNATIVES.get(stem, {}).items():
            fits.append({"variant": variant, "config": config, "overrides": overrides, "cpu": False})
        if (cpu := cpu_profile_for(config)) is not None:
            fits.append({"variant": "CPU profile", "config": cpu, "overrides": CPU_OVERRIDES, "cpu": True})
        for fit in fits:
            fit |= {"profile": stem, "name": f"fit-{stem}-{fit['variant'].replace(' ', '_').replace('+', '')}"}
        plan += fits
    return plan


def whole_fit_jobs(
    plan: list[dict[str, Any]], run_fit: Callable[[dict[str, Any], int, str], dict[str, Any]]
) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    """Jobs for ``gpu-check``'s sequential stage; ``run_fit(fit, rollouts, workdir)`` runs one and reads its probe."""

    def job(fit: dict[str, Any]) -> dict[str, Any]:
        rollouts = rollouts_for(fit["config"])
        with tempfile.TemporaryDirectory(prefix=f"gpu-check-{fit['name']}-") as workdir:  # its checkpoints: scratch
            return {"rollouts": rollouts, **run_fit(fit, rollouts, workdir)}

    return [(fit["name"], lambda f=fit: job(f)) for fit in plan]


def against_cpu(plan: list[dict[str, Any]], results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each planned fit with what it measured (or why not) and ``x_cpu``: its frames/s over its profile's CPU
    profile's (None where either is missing)."""
    rows = [{**fit, **results.get(fit["name"], {"error": "not run"})} for fit in plan]
    cpu_rate = {row["profile"]: row.get("frames_per_s") for row in rows if row.get("cpu") and "error" not in row}
    judged = []
    for row in rows:
        base, rate = cpu_rate.get(row["profile"]), row.get("frames_per_s")
        usable = base and rate and not (math.isnan(base) or math.isnan(rate))
        judged.append({**row, "x_cpu": rate / base if usable else None})
    return judged
