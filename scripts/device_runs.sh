#!/usr/bin/env bash
# `infer --bench` runs listed in a file, on the machine with the GPU: one run a line, "NAME ARGS..."
# (blank lines and # comments skipped; leading VAR=VALUE words of ARGS go to the environment),
# each run as `infer --bench TMP/NAME.json ARGS...` under a time limit. infer is build/infer, or
# `.bundle/run.sh infer` where a .bundle folder holds a build carried to a machine without its
# shared libraries (bin/, lib/ and a run.sh that puts them on the paths). Everything is gathered
# after every run into OUT_DIR/runs.json (an object: name -> the bench's JSON) and
# OUT_DIR/runs.log (stderr), so a session cut short still leaves what finished.
# Usage: scripts/device_runs.sh OUT_DIR LIST_FILE [SECONDS_PER_RUN, default 240]
# The performance table: scripts/device_runs.sh OUT scripts/device/perf_table.txt 150
set -uo pipefail
out=$1 list=$2 limit=${3:-240}
tmp=$(mktemp -d)
if [[ -x .bundle/run.sh ]]; then infer=(.bundle/run.sh infer); else infer=(build/infer); fi
mkdir -p "$out"
gather() {
  python3 - "$tmp" "$out/runs.json" <<'PY'
import json, os, sys
src, dst = sys.argv[1], sys.argv[2]
runs = {}
for f in sorted(os.listdir(src)):
    if f.endswith('.json'):
        try:
            runs[f[:-5]] = json.load(open(os.path.join(src, f)))
        except ValueError as e:
            runs[f[:-5]] = {"error": str(e)}
json.dump(runs, open(dst, 'w'), indent=1)
PY
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/runs.log" 2>&1 ||
  echo "(no nvidia-smi)" >"$out/runs.log"
while read -r name args; do
  [[ -z $name || $name == \#* ]] && continue
  echo "== $name: $args ($(date +%T))" | tee -a "$out/runs.log"
  envs=()
  read -r -a words <<<"$args"
  while [[ ${#words[@]} -gt 0 && ${words[0]} =~ ^[A-Z_][A-Z0-9_]*= ]]; do
    envs+=("${words[0]}"); words=("${words[@]:1}")
  done
  timeout "$limit" env "${envs[@]}" "${infer[@]}" --bench "$tmp/$name.json" "${words[@]}" \
    2>>"$out/runs.log" </dev/null
  echo "rc=$? $(date +%T)" | tee -a "$out/runs.log"
  gather
done <"$list"
gather
