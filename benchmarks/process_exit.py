"""The CPU a ``python -m iquitos_lightning`` process spends after its command is done: with and without Python's
teardown (iquitos_lightning/process_exit.py), side by side in one run.

    python benchmarks/process_exit.py            # a smoke fit on the tiny site, 3 rounds
    python benchmarks/process_exit.py --rounds 5 -- fit --help   # any command that does the same work each time

Each round runs the same command twice, alternating: as the program (``python -m iquitos_lightning ...``: the fast
exit) and as ``main([...])`` called from ``python -c`` (the normal exit, teardown included). Both import the same
modules and run the same command; the difference is the teardown. The medians and their difference are printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from per_test_cpu import children_cpu_s  # benchmarks/ is this script's folder on sys.path

REPO = Path(__file__).resolve().parents[1]
AS_FUNCTION = "import sys; from iquitos_lightning.__main__ import main; sys.exit(main(sys.argv[1:]))"


def smoke_fit(folder: Path) -> list[str]:
    """A 56-frame SAC fit of ``configs/smoke.yaml`` on the tiny site, writing under ``folder``."""
    return [
        "fit", "--config", str(REPO / "configs" / "smoke.yaml"), "--run.new",
        f"--model.init_args.env.site={REPO / 'configs' / 'site' / 'tiny.yaml'}",
        f"--model.init_args.env.backend.data_root={REPO / 'data'}", "--model.init_args.rollout.frame_budget=56",
        "--model.init_args.rollout.eval_episodes=0", "--tracking.wandb=false",
        f"--trainer.logger.init_args.save_dir={folder}", f"--checkpoint.dirpath={folder / 'checkpoints'}",
    ]  # fmt: skip


def cpu_of(command: list[str]) -> float:
    """CPU seconds (user + system) of ``command`` run to its end; it must succeed."""
    before = children_cpu_s()
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=environment)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])}... failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return children_cpu_s() - before


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each way (default: %(default)s)")
    parser.add_argument("command", nargs="*", help="the command's arguments (after --; default: a smoke fit)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="process-exit-") as scratch:
        fast, normal = [], []
        for round_ in range(args.rounds):
            command = args.command or smoke_fit(Path(scratch) / f"round-{round_}")
            fast.append(cpu_of([sys.executable, "-m", "iquitos_lightning", *command]))
            normal.append(cpu_of([sys.executable, "-c", AS_FUNCTION, *command]))
            print(f"round {round_ + 1}: fast exit {fast[-1]:.2f} s, normal exit {normal[-1]:.2f} s of CPU", flush=True)
    fast_s, normal_s = statistics.median(fast), statistics.median(normal)
    print(f"median CPU: fast exit {fast_s:.2f} s, normal exit {normal_s:.2f} s: "
          f"{normal_s - fast_s:.2f} s less a process ({fast_s / normal_s:.2f}x)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
