"""Measure the fast-path switches on our SAC, PPO and A2C: gradient updates per second, and whether losses stay finite.

A table of :func:`benchmarks.gpu_check.update_step.measure_update_step` cells (the module says what is
timed and why); ``python -m iquitos_lightning gpu-check`` runs the same cells on a GPU with the rest of
the GPU proof.

    python benchmarks/bench_speed.py                                # CPU: eager vs compile, 32-true
    python benchmarks/bench_speed.py --accelerator gpu --precisions 32-true 16-mixed bf16-mixed \\
        --switches eager compile cuda_graphs compile+cuda_graphs

Prints one table (rich) and, with ``--json PATH``, writes the rows.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from benchmarks.gpu_check.update_step import UpdateStepSizes, measure_update_step, register_stand_in


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algorithms", nargs="+", default=["sac", "ppo", "a2c"])
    parser.add_argument("--switches", nargs="+", default=["eager", "compile"])
    parser.add_argument("--precisions", nargs="+", default=["32-true"])
    parser.add_argument("--accelerator", default="cpu")
    parser.add_argument("--obs", type=int, default=532)
    parser.add_argument("--act", type=int, default=129)
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256])
    parser.add_argument("--batch", type=int, default=256, help="SAC batch / PPO minibatch")
    parser.add_argument("--sac-frames", type=int, default=100, help="frames (= updates) per SAC rollout")
    parser.add_argument("--onpolicy-frames", type=int, default=1024, help="frames per PPO/A2C rollout")
    parser.add_argument("--warmup", type=int, default=2, help="rollouts not timed (compilation, capture)")
    parser.add_argument("--rollouts", type=int, default=4, help="rollouts timed")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    register_stand_in(args.obs, args.act)
    sizes = UpdateStepSizes(
        hidden_sizes=tuple(args.hidden),
        batch_size=args.batch,
        sac_frames=args.sac_frames,
        onpolicy_frames=args.onpolicy_frames,
        warmup=args.warmup,
        rollouts=args.rollouts,
    )
    rows = [
        measure_update_step(algorithm, switches, precision, args.accelerator, sizes, obs=args.obs, act=args.act)
        for algorithm in args.algorithms
        for precision in args.precisions
        for switches in args.switches
    ]
    table = Table(
        title=f"update step, {args.obs} obs / {args.act} act, {args.hidden}, batch {args.batch}, {args.accelerator}"
    )
    for column in ("algorithm", "switches", "ran", "precision", "updates/s", "timed", "losses finite", "wall s"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row.algorithm.upper(),
            row.switches,
            row.switches_run,
            row.precision,
            f"{row.updates_per_s:.1f}",
            str(row.updates_timed),
            str(row.losses_finite),
            f"{row.wall_s:.0f}",
        )
    Console(width=140).print(table)
    if args.json:
        args.json.write_text(json.dumps([row.as_dict() for row in rows], indent=2) + "\n")


if __name__ == "__main__":
    main()
