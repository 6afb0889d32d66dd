#!/usr/bin/env bash
# Everything asked of a lent GPU machine, in one call: GPU throughput and MFU against
# transformers (bench/train/gpu.py, with and without --compile), the GPU correctness checks
# (bench/train/gpu_checks.py), and how clean, dedup, dedup --near and shard scale with
# Beam workers (bench/scale/run.py). Tables and a timed log go to $OUT.
#
#   bench/device/prepare.sh                          # here, first: wheels and data
#   device run: bash bench/device/run.sh             # carry [".whl", ".devdata"], timeout 600
#   bench/device/run.sh --cpu                        # rehearsal here: the same steps, small
#
# The machine is lent for minutes, so two lanes share it: the GPU lane on cores 0-7, the
# scaling lane on cores 8-15 for 1 to 8 workers; its 16-worker round waits for the GPU lane
# to end and then takes every core. The checks, which time nothing, run on the GPU lane
# between the eager and the compiled runs. Each step has its own time limit within one
# budget ($DEVICE_BUDGET_S, 520 s), so what finished comes back even if a step hangs.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-$ROOT/bench/out/device}
mkdir -p "$OUT"
BUDGET=${DEVICE_BUDGET_S:-520}
START=$(date +%s)
DONE=/tmp/clozeworks-gpu-lane.done
rm -f "$DONE"

elapsed() { echo $(($(date +%s) - START)); }
log() { echo "[$(elapsed) s] $*" | tee -a "$OUT/log.txt"; }
# step FILE LIMIT COMMAND...: appends the command's output to $OUT/FILE, killing it after
# LIMIT seconds or when the budget runs out, whichever comes first.
step() {
    local file=$1 limit=$2
    shift 2
    local left=$((BUDGET - $(elapsed)))
    ((left < limit)) && limit=$left
    if ((limit < 15)); then
        log "skipped ($left s left): $*"
        return 0
    fi
    log "start (limit $limit s): $*"
    echo "\$ $*" >>"$OUT/$file"
    # SIGABRT: Python's faulthandler prints where every thread was.
    PYTHONFAULTHANDLER=1 timeout -k 5 -s ABRT "$limit" "$@" >>"$OUT/$file" 2>&1
    log "end (rc $?): $*"
}

if [ "${1:-}" = "--cpu" ]; then
    PY=$ROOT/.venv/bin/python
    export PYTHONPATH=$ROOT
    DEVICE=cpu
    GPU_LANE=() SCALE_LANE=()
    SMALL=(--preset bert-mini --steps 3 --warmup 1)
    COMPILED=()
    BATCH128=16 BATCH512=4 CHECK_STEPS=40 GB=0.01 WORKERS=(1 2)
else
    log "installing $(ls .whl | wc -l) wheels"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    PY=python3
    export PYTHONPATH=/tmp/site:$ROOT
    DEVICE=cuda
    GPU_LANE=(taskset -c 0-7) SCALE_LANE=(taskset -c 8-15)
    if ! command -v taskset >/dev/null || (($(nproc) < 16)); then GPU_LANE=() SCALE_LANE=(); fi
    SMALL=()
    COMPILED=(--warmup 10) # a recompile for dynamic shapes comes after the first few steps
    BATCH128=256 BATCH512=32 CHECK_STEPS=${CHECK_STEPS:-300} GB=${SCALE_GB:-0.2}
    WORKERS=(1 2 4 8 16)
fi
export CLOZEWORKS_BENCH_PARAGRAPHS=$ROOT/.devdata/paragraphs.json.zst
chmod +x .devdata/bin/time
if [ -x /usr/bin/time ]; then export CLOZEWORKS_GNU_TIME=/usr/bin/time; else
    export CLOZEWORKS_GNU_TIME=$ROOT/.devdata/bin/time; fi
export PYTHONUNBUFFERED=1

{
    date -u
    nproc
    free -g | head -2
    uptime
    nvidia-smi 2>&1 | head -15
    $PY -c "import importlib.metadata as m; print({n: m.version(n) for n in ('torch', \
'transformers', 'tokenizers', 'apache-beam', 'pyarrow', 'webdataset', 'clozeworks')})"
    $PY -c "import apache_beam, webdataset, clozeworks.trainer.loop; print('imports ok')"
} >"$OUT/env.txt" 2>&1
log "env: $(tail -1 "$OUT/env.txt")"

gpu_lane() {
    local gpu=("${GPU_LANE[@]}" "$PY" -m bench.train.gpu --device "$DEVICE" "${SMALL[@]}")
    step gpu.txt 120 "${gpu[@]}" --data .devdata/shards128 --batch "$BATCH128" --profile 5
    step gpu.txt 100 "${gpu[@]}" --data .devdata/shards512 --batch "$BATCH512"
    # Correctness, not timing: on the GPU lane's cores, beside the scaling lane.
    step checks.txt 200 "${GPU_LANE[@]}" "$PY" -m bench.train.gpu_checks --device "$DEVICE" \
        --data .devdata/shards128 --steps "$CHECK_STEPS"
    step gpu.txt 160 "${gpu[@]}" --data .devdata/shards128 --batch "$BATCH128" --compile "${COMPILED[@]}"
    step gpu.txt 140 "${gpu[@]}" --data .devdata/shards512 --batch "$BATCH512" --compile "${COMPILED[@]}"
    touch "$DONE" # the GPU lane is over: the scaling lane may take every core
}

scale_lane() {
    step scale.txt "$BUDGET" "${SCALE_LANE[@]}" "$PY" bench/scale/run.py --gb "$GB" \
        --stages clean dedup near nsp --workers "${WORKERS[@]}" --files 16 \
        --tokenizer .devdata/tokenizer --widen-after "$DONE" --work /tmp/clozeworks-scale
}

gpu_lane &
scale_lane &
wait
log "done; load average $(cut -d' ' -f1-3 /proc/loadavg)"
