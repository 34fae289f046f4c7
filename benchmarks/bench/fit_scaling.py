"""The whole fit's frames/s against the twin's batch (``env.backend.num_envs``): the card's PPO at each size.

Why beside the twin's own table (bench/twin.py): the twin alone says how fast collection can get; a fit also
updates, and the card's PPO does 160 Adam steps per 8,192-frame rollout whatever the batch, so the fit gains less
than its twin. Each size is the card's profile (``configs/ppo_cpu.yaml``) with only ``num_envs`` changed: the same
frames a rollout (8,192: 128 steps of 64 envs, 32 of 256, 8 of 1,024), the same update schedule, so the rows differ
only in how collection is batched. Each fit runs in its own process through the project's CLI with
:class:`~benchmarks.gpu_check.tasks.FitProbe` (frames/s after the first rollout), no evaluation and no
final test; the site years and start peaks come from data/'s caches after the first size.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CARD_PPO = "configs/ppo_cpu.yaml"
FIT_ROLLOUTS = 4  # the first (start-up) and three timed
FIT_TIMEOUT_S = 600


@dataclass
class FitScalingRow:
    """The card's PPO fit at one batch size of the twin."""

    num_envs: int
    status: str  # "measured", or why not
    frames_per_s: float | None = None  # after the first rollout: collection and updates
    ratio_to_first: float | None = None  # over the first measured size's
    timed_rollouts: int = 0


def fit_command(config: str, num_envs: int, workdir: str, report_path: str) -> list[str]:
    """``fit`` of ``config`` at ``num_envs`` twin envs for :data:`FIT_ROLLOUTS` rollouts, the probe reporting."""
    # lazy: the probe's module loads Lightning and torch, which only a measurement needs
    from benchmarks.gpu_check.tasks import profile_fit_command

    overrides = (f"--model.init_args.env.backend.num_envs={num_envs}", "--trainer.accelerator=cpu")
    return profile_fit_command(config, FIT_ROLLOUTS, workdir, report_path, overrides)


def measure_fit_scaling(sizes: tuple[int, ...], config: str = CARD_PPO) -> list[FitScalingRow]:
    """One fit per size, one after another (each in its own process, so one failure costs only its row)."""
    rows = []
    for num_envs in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-fit-scaling-") as workdir:
            report = Path(workdir) / "probe.json"
            completed = subprocess.run(
                fit_command(config, num_envs, workdir, str(report)),
                capture_output=True,
                text=True,
                timeout=FIT_TIMEOUT_S,
                check=False,
            )
            if completed.returncode != 0 or not report.exists():
                last = (completed.stderr.strip().splitlines() or ["no output"])[-1]
                rows.append(FitScalingRow(num_envs, f"failed: {last[:200]}"))
                continue
            probe = json.loads(report.read_text())
            rows.append(
                FitScalingRow(num_envs, "measured", probe["frames_per_s"], timed_rollouts=probe["timed_rollouts"])
            )
    first = next((row.frames_per_s for row in rows if row.frames_per_s), None)
    for row in rows:
        if row.frames_per_s and first:
            row.ratio_to_first = row.frames_per_s / first
    return rows
