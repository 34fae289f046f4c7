#!/usr/bin/env bash
# Session 39 call 1 (issue 61): the device twin's CUDA equivalence test (pytest -m gpu), the training twin's
# frames/s against num_envs on CUDA and the CPU, and ppo_rtx4060 with the twin on the GPU (time-stopped at 150 s).
set -u
export PYTHONUNBUFFERED=1 WANDB_MODE=disabled
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $OUT/env.txt
git log --oneline -1 | tee -a $OUT/env.txt
[ -d data/iquitos-2026-seed2033 ] || { tar -xJf .gpu/data.tar.xz && tar -xJf .gpu/tiny.tar.xz; } || { echo "data untar failed"; exit 1; }
[ -d /tmp/site/torchrl ] || bash scripts/install-offline.sh .gpu/wheelhouse-gpu /tmp/site 2>&1 | tail -2 | tee -a $OUT/env.txt
export PYTHONPATH=$PWD:/tmp/site
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu -n 3 tests/envs/test_device_twin.py > $OUT/pytest_gpu.log 2>&1
echo "pytest exit $?"; tail -12 $OUT/pytest_gpu.log
timeout 420 python3 -m iquitos_lightning gpu-check --only device-twin --device-fits ppo_rtx4060 --out /tmp/gc1 \
  --deadline-s 400 > $OUT/gpu_check.log 2>&1
echo "gpu-check exit $?"
cp /tmp/gc1/gpu_check.md /tmp/gc1/gpu_check.json $OUT/ 2>/dev/null
tar -czf $OUT/raw.tgz -C /tmp/gc1 raw 2>/dev/null
cat /tmp/gc1/gpu_check.md 2>/dev/null || tail -40 $OUT/gpu_check.log
