#!/bin/bash
# the comparison: single-file PPO vs the SB3 ppo-v1 recipe, equal steps on testbed
set -x
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1
KW='{"action_mode": "sequential", "allow_preempt": true, "flap_damping": {"engage_share": 0.0}, "window": 32, "observation": "v1", "window_order": "pred_time", "reward_scale": 36000.0, "stall_hours": 2, "early_end": "charge"}'
OUT=${OUT:-runs/single-file-ppo}
mkdir -p $OUT
for S in 0 1; do
  nice -n 10 .venv/bin/python examples/ppo_mask.py --scenario testbed --env-kwargs "$KW" --total-timesteps 100000 --seed $S --out-dir $OUT/single --run-name seed$S --eval-seeds 2000-2009 > $OUT/single_seed$S.log 2>&1
  nice -n 10 .venv/bin/aryl-gym train --config maskable_ppo_scratch --scenario testbed --seed $S --timesteps 100000 --out $OUT/sb3 --quiet > $OUT/sb3_seed$S.log 2>&1
done
for R in $OUT/sb3/*/; do
  nice -n 10 .venv/bin/aryl-gym evaluate --agent $R/model.zip --scenario testbed --seeds 2000-2009 --against aryl --json > $R/evaluate.json 2> $R/evaluate.err
done
nice -n 10 .venv/bin/python experiments/13-single-file-ppo/paired.py "$OUT"
