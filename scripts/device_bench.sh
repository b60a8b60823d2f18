#!/usr/bin/env bash
# GPU benchmarks on the device machine (README "GPU"): infer --bench --gpu on random-weight models
# of the published shapes, generated in memory (infer --model configs/X.json). Writes OUT_DIR/bench.json
# (an object: run name -> the bench's JSON) and OUT_DIR/bench.log (every run's stderr); the device
# tool brings back only a few files, so everything is gathered into these two, after every run
# (a call cut short still brings back what finished).
# Usage: scripts/device_bench.sh OUT_DIR RUN... with RUN = CONFIG:QUANT, e.g. e2b:q4 12b:none.
# BENCH_EXTRA adds switches to every run (e.g. --profile).
# Runs through .bundle/run.sh (../shared/tools/device/bundle.sh .bundle build/infer).
set -uo pipefail
out=$1; shift
tmp=$(mktemp -d)
gather() {
  python3 - "$tmp" "$out/bench.json" <<'PY'
import json, os, sys
src, dst = sys.argv[1], sys.argv[2]
runs = {f[:-5]: json.load(open(os.path.join(src, f))) for f in sorted(os.listdir(src)) if f.endswith('.json')}
json.dump(runs, open(dst, 'w'), indent=1)
for name, j in runs.items():
    print(f"{name}: prefill {j['prefill_tokens_per_s']:.0f} t/s, decode {j['decode_tokens_per_s']:.1f} t/s, "
          f"{j['decode_bytes_per_token'] / 1e9:.2f} GB/token, bound fraction {j['decode_bandwidth_fraction']:.3f}")
PY
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/bench.log" 2>&1
for run in "$@"; do
  cfg=${run%%:*} quant=${run##*:}
  name="gpu-$cfg-$quant"
  echo "== $name $(date +%T)" | tee -a "$out/bench.log"
  timeout 150 .bundle/run.sh infer --bench "$tmp/$name.json" --gpu --quant "$quant" ${BENCH_EXTRA:-} \
    --model "configs/$cfg.json" 2>>"$out/bench.log"
  echo "rc=$? $(date +%T)" | tee -a "$out/bench.log"
  gather >/dev/null
done
gather
