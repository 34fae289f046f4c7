"""Session 17: the card's SAC profile under the 8 GiB cap, as committed (16-mixed eager) and with bf16-mixed +
CUDA graphs (the update step's fastest cells), same rollouts, one after the other; FitProbe's JSON for each."""

import json
import os
import subprocess
import sys
import tempfile
import time

from iquitos_lightning.bench.gpu_check_tasks import profile_fit_command

from iquitos_lightning.profile.hardware import MEMORY_CAP_ENV

config, rollouts, out, timeout_s = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
os.makedirs(out, exist_ok=True)
env = {**os.environ, "WANDB_MODE": "disabled", MEMORY_CAP_ENV: "8"}
variants = {
    "as-committed": [],
    "bf16-cuda-graphs": ["--trainer.precision=bf16-mixed", "--model.init_args.speed.cuda_graphs=true"],
    "32-true-cuda-graphs": ["--trainer.precision=32-true", "--model.init_args.speed.cuda_graphs=true"],
}
results = {}
for name, extra in variants.items():
    work = tempfile.mkdtemp(prefix=f"fitpair-{name}-")
    report = f"{out}/{name}.json"
    command = profile_fit_command(config, rollouts, work, report) + extra
    started = time.perf_counter()
    with open(f"{out}/{name}.log", "w") as log:
        try:
            code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    row = json.load(open(report)) if os.path.exists(report) else {}
    results[name] = {
        "exit": code,
        "wall_s": round(time.perf_counter() - started, 1),
        **{
            k: row.get(k)
            for k in (
                "precision",
                "frames_per_s",
                "updates_per_s",
                "timed_rollouts",
                "peak_allocated_gib",
                "peak_reserved_gib",
                "estimate_gib",
                "monitor_vs_torch",
            )
        },
    }
    print(name, json.dumps(results[name]), flush=True)
json.dump(results, open(f"{out}/fitpair.json", "w"), indent=2)
