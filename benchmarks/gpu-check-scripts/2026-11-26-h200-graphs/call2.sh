#!/usr/bin/env bash
# Session 17 call 2: the fixed probe (VRAMMonitor vs torch at the same moment), 32-true cells with true labels,
# then the card's SAC profile as committed vs bf16/32-true + CUDA graphs in a real fit.
set -u
export PYTHONUNBUFFERED=1 WANDB_MODE=disabled
tar -xJf .gpu/data.tar.xz || { echo "data untar failed"; exit 1; }
bash scripts/install-offline.sh .gpu/wheelhouse-gpu /tmp/site > /dev/null 2>&1 || { echo install failed; exit 1; }
export PYTHONPATH=$PWD:/tmp/site
timeout 200 python3 -m iquitos_lightning gpu-check --out /tmp/gc --only profiles update \
  --precisions 32-true --deadline-s 170 --jobs 9 > $OUT/gpu_check.log 2>&1
echo "gpu-check exit $?"
cp /tmp/gc/gpu_check.md /tmp/gc/gpu_check.json $OUT/ 2>/dev/null
tar -czf $OUT/raw.tgz -C /tmp/gc raw 2>/dev/null
timeout 150 python3 .gpu/fitpair.py configs/sac_rtx4060.yaml 4 /tmp/fp 48 > $OUT/fitpair.log 2>&1
echo "fitpair exit $?"
cp /tmp/fp/*.json /tmp/fp/*.log $OUT/ 2>/dev/null
sed -n '/## Training profiles/,/## Out-of-memory/p' /tmp/gc/gpu_check.md
cat $OUT/fitpair.log
