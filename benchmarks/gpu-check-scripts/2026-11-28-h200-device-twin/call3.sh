#!/usr/bin/env bash
# Session 39 call 3 (issue 61), after the fix of the fit probe call 1 failed on (its memory estimate ran a CPU actor on the moved twin): ppo_rtx4060 (time-stopped at 150 s), a2c_rtx4060, sac_rtx4060 and ppo_auto with the twin on
# the GPU, each timed 12 s after its first rollout (speed figures; the twin's table is call 1's).
set -u
export PYTHONUNBUFFERED=1 WANDB_MODE=disabled
[ -d data/iquitos-2026-seed2033 ] || { tar -xJf .gpu/data.tar.xz && tar -xJf .gpu/tiny.tar.xz; } || { echo "data untar failed"; exit 1; }
[ -d /tmp/site/torchrl ] || bash scripts/install-offline.sh .gpu/wheelhouse-gpu /tmp/site > /dev/null 2>&1
export PYTHONPATH=$PWD:/tmp/site
timeout 520 python3 -m iquitos_lightning gpu-check --only device-twin --device-table off \
  --device-fits ppo_rtx4060 a2c_rtx4060 sac_rtx4060 ppo_auto --out /tmp/gc2 --deadline-s 500 > $OUT/gpu_check.log 2>&1
echo "gpu-check exit $?"
cp /tmp/gc2/gpu_check.md /tmp/gc2/gpu_check.json $OUT/ 2>/dev/null
tar -czf $OUT/raw.tgz -C /tmp/gc2 raw 2>/dev/null
cat /tmp/gc2/gpu_check.md 2>/dev/null || tail -40 $OUT/gpu_check.log
