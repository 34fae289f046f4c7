#!/usr/bin/env bash
# Session 17 device call: what session 16 could not measure (bf16-mixed cells, CUDA graphs after the bounds fix,
# the auto profiles after the fixes), on the current tree.
set -u
export PYTHONUNBUFFERED=1 WANDB_MODE=disabled
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $OUT/env.txt
git log --oneline -1 | tee -a $OUT/env.txt
tar -xJf .gpu/data.tar.xz || { echo "data untar failed"; exit 1; }
bash scripts/install-offline.sh .gpu/wheelhouse-gpu /tmp/site 2>&1 | tail -2 | tee -a $OUT/env.txt
export PYTHONPATH=$PWD:/tmp/site
python3 -c "import iquitos_lightning, sys; print(iquitos_lightning.__file__)" | tee -a $OUT/env.txt
timeout 470 python3 -m iquitos_lightning gpu-check --out /tmp/gc --only profiles update \
  --precisions bf16-mixed 32-true --deadline-s 420 --jobs 8 > $OUT/gpu_check.log 2>&1
echo "gpu-check exit $?"
cp /tmp/gc/gpu_check.md /tmp/gc/gpu_check.json $OUT/ 2>/dev/null
tar -czf $OUT/raw.tgz -C /tmp/gc raw 2>/dev/null
cat /tmp/gc/gpu_check.md 2>/dev/null || tail -40 $OUT/gpu_check.log
