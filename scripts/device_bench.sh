#!/usr/bin/env bash
# GPU benchmarks on the machine with the GPU (docs/PERFORMANCE.md): infer --bench --gpu on
# random-weight models of the published shapes, generated in memory (infer --model configs/X.json).
# Writes OUT_DIR/bench.json (an object: run name -> the bench's JSON) and OUT_DIR/bench.log (every
# run's stderr), gathered after every run (a session cut short still leaves what finished).
# Usage: scripts/device_bench.sh OUT_DIR RUN... with RUN = CONFIG:QUANT, e.g. e2b:q4 12b:none.
# BENCH_EXTRA adds switches to every run (e.g. --profile).
# infer is build/infer, or `.bundle/run.sh infer` where a .bundle folder holds a build carried
# to a machine without its shared libraries (scripts/device_runs.sh says more).
set -uo pipefail
out=$1; shift
tmp=$(mktemp -d)
if [[ -x .bundle/run.sh ]]; then infer=(.bundle/run.sh infer); else infer=(build/infer); fi
mkdir -p "$out"
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
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/bench.log" 2>&1 ||
  echo "(no nvidia-smi)" >"$out/bench.log"
for run in "$@"; do
  cfg=${run%%:*} quant=${run##*:}
  name="gpu-$cfg-$quant"
  echo "== $name $(date +%T)" | tee -a "$out/bench.log"
  timeout 150 "${infer[@]}" --bench "$tmp/$name.json" --gpu --quant "$quant" ${BENCH_EXTRA:-} \
    --model "configs/$cfg.json" 2>>"$out/bench.log"
  echo "rc=$? $(date +%T)" | tee -a "$out/bench.log"
  gather >/dev/null
done
gather
