#!/usr/bin/env bash
# NB201 on one CUDA device, as run on the lent H100 (see benchmarks/sections/nb201.md):
#   1. the CUDA parity tests (tests/device: every proxy and the harness, CPU vs CUDA),
#   2. `ctrnas vision correlate --device cuda` on ARCHS cells with the warm-up levels on WARM_ARCHS of them,
#      WORKERS processes sharing the GPU, no new cell after LIMIT seconds (re-run to resume: WORK keeps the CSVs).
#   3. `ctrnas vision search --device cuda` (evolution with SiGeo as fitness, 2 seeds).
# Usage: OUT=dir DATA=dir benchmarks/nb201_gpu.sh   (DATA as ../shared/data: cifar10/, nb201/)
# `python -m ctrnas vision ...` needs no TorchRec (handlers import what they use), so it runs on a machine
# without it, as the lent GPU machine is.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/nb201_gpu_out} WORK=${WORK:-/tmp/nb201_gpu} DATA=${DATA:-../shared/data}
ARCHS=${ARCHS:-1000} WARM_ARCHS=${WARM_ARCHS:-300} WORKERS=${WORKERS:-14} LIMIT=${LIMIT:-300}
DEVICE=${DEVICE:-cuda} BATCH=${BATCH:-64} WARMUP=${WARMUP:-0,0.1,0.2,0.4,1.25} TESTS=${TESTS:-1} PY=${PY:-python3}
SEARCH_LIMIT=${SEARCH_LIMIT:-120}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
mkdir -p "$OUT" "$WORK"
{ date -u; nvidia-smi -L 2>&1; nproc; $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"; } \
  > "$OUT/env.txt" 2>&1
if [ "$TESTS" = 1 ]; then
  t0=$(date +%s)
  timeout 150 $PY -m pytest -q -p no:cacheprovider tests/device > "$OUT/tests.log" 2>&1
  echo "rc=$? wall=$(( $(date +%s) - t0 ))s" >> "$OUT/tests.log"
fi
# Snapshot of the CSVs every 20 s, so a run stopped from outside still brings its rows back.
( while sleep 20; do tar -czf "$OUT/partial.tgz.tmp" --exclude="*.pkl" -C "$WORK" . 2>/dev/null && mv "$OUT/partial.tgz.tmp" "$OUT/partial.tgz"; done ) &
snap=$!
t0=$(date +%s)
$PY -m ctrnas vision correlate --device "$DEVICE" --workers "$WORKERS" --time-limit "$LIMIT" --archs "$ARCHS" \
  --warmup "$WARMUP" --warmup-archs "$WARM_ARCHS" --proxies sigeo,zico,naswot,synflow,params \
  --batch-size "$BATCH" --n-boot 200 --data "$DATA/cifar10/cifar10_train_first4000.npz" --table "$DATA/nb201/nb201_acc.csv" \
  --out "$WORK" > "$OUT/correlate.log" 2>&1
echo "correlate rc=$? wall=$(( $(date +%s) - t0 ))s" >> "$OUT/correlate.log"
kill $snap 2>/dev/null
t0=$(date +%s)
timeout "$SEARCH_LIMIT" $PY -m ctrnas vision search --device "$DEVICE" --proxy sigeo --seeds 0,1 --population 16 \
  --generations 10 --data "$DATA/cifar10/cifar10_train_first4000.npz" --table "$DATA/nb201/nb201_acc.csv" \
  --out "$WORK/search" > "$OUT/search.log" 2>&1
echo "search rc=$? wall=$(( $(date +%s) - t0 ))s" >> "$OUT/search.log"
cp "$WORK"/scores.csv "$WORK"/summary.md "$WORK"/scatter.png "$OUT"/ 2>/dev/null
tar -czf "$OUT/partial.tgz" --exclude="*.pkl" -C "$WORK" .
tail -3 "$OUT/correlate.log"
