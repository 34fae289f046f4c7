"""Bench the twin against CityLearn on this machine and print the rows (JSON lines) as they come.

    python benchmarks/twin_speed.py speed [--site configs/site/iquitos-2026.yaml]
    python benchmarks/twin_speed.py equivalence --steps 3000
    python benchmarks/twin_speed.py training --algorithm PPO --num-envs 64 --frames 1000000 [--evaluate]

``speed``: env steps/s of the twin at B = 1, 16, 256, 1024 against CityLearn; ``equivalence``: the
long version of the CI equivalence test (CityLearn's first N hours with random, uncontrolled and
rule-based actions replayed on the twin); ``training``: frames/s of PPO/A2C on many twin envs and,
with ``--evaluate``, the trained policy run on CityLearn and on the twin (same KPIs expected).
Torch runs on one thread by default: on a busy 2-core machine two OpenMP threads spin against
each other and the batched twin gets 5 to 6 times slower (measured: 136k vs 23k steps/s).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from iquitos_lightning.bench.twin_speed import (
    BATCH_SIZES,
    long_equivalence,
    policy_on_both,
    training_speed,
    twin_speed_table,
)


def _print(row: dict) -> None:
    print(json.dumps({key: value for key, value in row.items() if key != "agent"}, default=float), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("speed", "equivalence", "training"))
    parser.add_argument("--site", default="configs/site/iquitos-2026.yaml")
    parser.add_argument("--data-root", type=Path, default=Path("data"))
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=list(BATCH_SIZES))
    parser.add_argument("--citylearn-steps", type=int, default=50)
    parser.add_argument("--steps", type=int, default=3000, help="equivalence: hours of CityLearn per action source")
    parser.add_argument("--algorithm", choices=("PPO", "A2C"), default="PPO")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--rollout-steps", type=int, default=128, help="training: steps per env per rollout")
    parser.add_argument("--evaluate", action="store_true", help="training: run the policy on CityLearn and the twin")
    parser.add_argument("--eval-steps", type=int, default=None, help="training: hours of that evaluation (all)")
    parser.add_argument("--compile", action="store_true", help="also time / train the compiled twin")
    parser.add_argument("--physics-only", action="store_true", help="speed: also time the physics without TorchRL")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (1: best on a shared 2-core box)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.what == "speed":
        rows = twin_speed_table(
            args.site,
            args.data_root,
            tuple(args.batch_sizes),
            citylearn_steps=args.citylearn_steps,
            compile=args.compile,
            physics_only=args.physics_only,
        )
        for row in rows:
            _print(row)
    elif args.what == "equivalence":
        for row in long_equivalence(args.site, args.data_root, args.steps, compile_physics=args.compile):
            _print(row)
    else:
        settings = {"epochs": 4, "minibatch_size": 2048} if args.algorithm == "PPO" else {}
        row = training_speed(
            args.algorithm,
            args.site,
            args.data_root,
            args.num_envs,
            args.frames,
            args.rollout_steps,
            compile=args.compile,
            **settings,
        )
        _print(row)
        if args.evaluate:
            _print(policy_on_both(row["agent"].actor, args.site, args.data_root, args.eval_steps))


if __name__ == "__main__":
    main()
