#!/usr/bin/env bash
# Session 21, second call: the card's PPO profile as now committed (bf16-mixed + CUDA graphs) as a user runs it,
# shortened: 3 rollouts, one evaluation, checkpoint, final test on the twin (never run on a GPU).
set -u
export PYTHONUNBUFFERED=1 WANDB_MODE=disabled
T0=$(date +%s)
tar -xJf .gpu/data.tar.xz || { echo "data untar failed"; exit 1; }
bash scripts/install-offline.sh .gpu/wheelhouse-gpu /tmp/site 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site
echo "setup done at $(( $(date +%s) - T0 )) s"
timeout 150 python3 -m iquitos_lightning fit --config configs/ppo_rtx4060.yaml --trainer.default_root_dir /tmp/card \
  --trainer.logger.init_args.save_dir /tmp/card --checkpoint.dirpath /tmp/card/checkpoints \
  --model.init_args.rollout.frame_budget 24576 --model.init_args.rollout.eval_every_frames 24576 \
  --final_test.backend twin --tracking.wandb false > $OUT/ppo_card_fit.log 2>&1
echo "ppo card fit exit $? at $(( $(date +%s) - T0 )) s"
find /tmp/card -maxdepth 4 | sort > $OUT/ppo_card_files.txt
grep -v "━━\|│\|┃\|┏\|┡\|└\|^\s*$" $OUT/ppo_card_fit.log | tail -25
