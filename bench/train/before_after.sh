#!/bin/bash
# Training tokens/s of two installs back to back: bert-mini, 40 steps, batch 32, on a padded
# (nsp) and an unpadded (full-sentences) shard set.
#   pip install --no-deps --target /tmp/benchpkg <older checkout>
#   BEFORE=/tmp/benchpkg NSP=/tmp/demo/nsp128 FULL=/tmp/demo/shards bench/train/before_after.sh
set -e
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
OUT=${OUT:-/tmp/runs}
mkdir -p "$OUT"
run() { # label pythonpath data extra...
  label=$1; pp=$2; data=$3; shift 3
  rm -rf "$OUT/tb-$label"
  PYTHONPATH=$pp $PY -m cloze train --data "$data" --preset bert-mini --output "$OUT/tb-$label" \
    --max-steps 40 --batch-size 32 --log-every 20 --save-every 1000 --no-progress \
    --no-tensorboard --warmup 0.1 --seed 3 "$@" > "$OUT/tb-$label.log" 2>&1
  $PY -c "
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
print(f'{sys.argv[2]:<28} tokens/s (steps 21-40) {r[-1][\"tokens_per_s\"]:>7.0f}  mlm_loss {r[-1][\"mlm_loss\"]:.4f}')
" "$OUT/tb-$label/metrics.jsonl" "$label"
}
uptime
for rep in 1 2; do
  run before-nsp "$BEFORE" "$NSP"
  run after-nsp "$ROOT" "$NSP"
  run after-nsp-no-unpad "$ROOT" "$NSP" --no-unpad
  run before-full "$BEFORE" "$FULL"
  run after-full "$ROOT" "$FULL"
done
uptime
