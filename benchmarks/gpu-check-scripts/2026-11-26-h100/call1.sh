#!/usr/bin/env bash
# Session 20 device call: the card's SAC profile in whole fits (GPU as committed vs bf16/32-true + CUDA graphs vs the
# same machine's CPU), then gpu-check's profile fits (A2C's card profiles now hold noise and build a selection year)
# and the 32-true update cells not reached before.
set -u
export PYTHONUNBUFFERED=1 WANDB_MODE=disabled
T0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $OUT/env.txt
nproc | tee -a $OUT/env.txt
git log --oneline -1 | tee -a $OUT/env.txt
tar -xJf .gpu/data.tar.xz || { echo "data untar failed"; exit 1; }
bash scripts/install-offline.sh .gpu/wheelhouse-gpu /tmp/site 2>&1 | tail -2 | tee -a $OUT/env.txt
export PYTHONPATH=$PWD:/tmp/site
python3 -c "import torch, iquitos_lightning; print(torch.__version__, iquitos_lightning.__file__)" | tee -a $OUT/env.txt
echo "setup done at $(( $(date +%s) - T0 )) s"
timeout 300 python3 .gpu/fitpair2.py configs/sac_rtx4060.yaml 40 /tmp/fp 110 > $OUT/fitpair.log 2>&1
echo "fitpair exit $? at $(( $(date +%s) - T0 )) s"
tar -czf $OUT/fitpair.tgz -C /tmp/fp . 2>/dev/null
LEFT=$(( 545 - ($(date +%s) - T0) ))
echo "gpu-check deadline $(( LEFT - 25 )) s"
timeout $LEFT python3 -m iquitos_lightning gpu-check --out /tmp/gc --only profiles update \
  --precisions 32-true --deadline-s $(( LEFT - 25 )) --jobs 8 > $OUT/gpu_check.log 2>&1
echo "gpu-check exit $? at $(( $(date +%s) - T0 )) s"
cp /tmp/gc/gpu_check.md /tmp/gc/gpu_check.json $OUT/ 2>/dev/null
tar -czf $OUT/raw.tgz -C /tmp/gc raw 2>/dev/null
cat $OUT/fitpair.log
sed -n '/## Training profiles/,/## Out-of-memory/p' /tmp/gc/gpu_check.md 2>/dev/null | head -40
