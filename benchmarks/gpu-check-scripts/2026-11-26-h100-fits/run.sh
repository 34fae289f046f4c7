#!/usr/bin/env bash
# Session 21 device call: (1) gpu-check's whole fits, PPO and A2C first (never timed whole on a GPU), SAC after if
# the deadline allows; (2) the card's SAC profile as a user runs it, shortened: bf16-mixed + CUDA graphs with
# evaluations, checkpoints, the final twin test, then a resume with --ckpt_path last (never run on a GPU).
set -u
export PYTHONUNBUFFERED=1 WANDB_MODE=disabled
T0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $OUT/env.txt
git log --oneline -1 | tee -a $OUT/env.txt
tar -xJf .gpu/data.tar.xz || { echo "data untar failed"; exit 1; }
bash scripts/install-offline.sh .gpu/wheelhouse-gpu /tmp/site 2>&1 | tail -2 | tee -a $OUT/env.txt
export PYTHONPATH=$PWD:/tmp/site
echo "setup done at $(( $(date +%s) - T0 )) s"
FITS=$(( ${FITS_S:-320} - ($(date +%s) - T0) ))
timeout $(( FITS + 20 )) python3 -m iquitos_lightning gpu-check --out /tmp/gc --only fits --deadline-s $FITS > $OUT/gpu_check.log 2>&1
echo "gpu-check exit $? at $(( $(date +%s) - T0 )) s"
cp /tmp/gc/gpu_check.md /tmp/gc/gpu_check.json $OUT/ 2>/dev/null
tar -czf $OUT/raw.tgz -C /tmp/gc raw 2>/dev/null
CARD="--config configs/sac_rtx4060.yaml --trainer.default_root_dir /tmp/card --trainer.logger.init_args.save_dir /tmp/card
 --checkpoint.dirpath /tmp/card/checkpoints --checkpoint.every_n_frames 2048 --model.init_args.init_random_frames 1024
 --model.init_args.rollout.eval_every_frames 6144 --final_test.backend twin --tracking.wandb false"
timeout 120 python3 -m iquitos_lightning fit $CARD --model.init_args.rollout.frame_budget 6144 > $OUT/card_fit.log 2>&1
echo "card fit exit $? at $(( $(date +%s) - T0 )) s"
timeout 90 python3 -m iquitos_lightning fit $CARD --model.init_args.rollout.frame_budget 8192 --ckpt_path last > $OUT/card_resume.log 2>&1
echo "card resume exit $? at $(( $(date +%s) - T0 )) s"
find /tmp/card -maxdepth 4 -type f | sort > $OUT/card_files.txt
for f in $(find /tmp/card -name metrics.csv -o -name kpis.json -o -name '*.json' -path '*report*' | head -20); do
  mkdir -p $OUT/card/$(dirname ${f#/tmp/card/}); cp $f $OUT/card/${f#/tmp/card/}; done
sed -n '/## Whole fits/,/## Update step/p' /tmp/gc/gpu_check.md 2>/dev/null || tail -30 $OUT/gpu_check.log
tail -5 $OUT/card_fit.log; tail -5 $OUT/card_resume.log
