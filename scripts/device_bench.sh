#!/usr/bin/env bash
# GPU benchmarks on the device machine (README "GPU"): infer --bench --gpu on random-weight models
# of the published shapes, generated in memory (infer --model configs/X.json), one JSON per run.
# Usage: scripts/device_bench.sh OUT_DIR RUN... with RUN = CONFIG:QUANT, e.g. e2b:q4 12b:none.
# Runs through .bundle/run.sh (../shared/tools/device/bundle.sh .bundle build/infer).
set -uo pipefail
out=$1; shift
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv >"$out/gpu.txt" 2>&1
for run in "$@"; do
  cfg=${run%%:*} quant=${run##*:}
  name="gpu-$cfg-$quant"
  echo "== $name $(date +%T)"
  timeout 100 .bundle/run.sh infer --bench "$out/$name.json" --gpu --quant "$quant" \
    --model "configs/$cfg.json" 2>"$out/$name.log"
  echo "rc=$? $(date +%T)"; tail -3 "$out/$name.log"
done
