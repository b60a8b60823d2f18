#!/usr/bin/env bash
# Two builds of infer side by side on the machine with the GPU: every run of a list (as
# scripts/device_runs.sh reads it: "NAME ARGS..." a line) as `A --bench ...` and `B --bench ...`,
# alternated (A B, then B A the next round) so that drift on a shared machine falls on both.
# A and B are commands, e.g. ".bundle/run.sh infer_before" and ".bundle/run.sh infer".
# OUT_DIR/ab.json: name -> {"a": [bench JSON a round], "b": [...]}; OUT_DIR/ab.log: stderr.
# Usage: scripts/device_ab.sh OUT_DIR LIST_FILE ROUNDS SECONDS_PER_RUN "A" "B"
set -uo pipefail
out=$1 list=$2 rounds=$3 limit=$4 a=$5 b=$6
tmp=$(mktemp -d)
mkdir -p "$out"
gather() {
  python3 - "$tmp" "$out/ab.json" <<'PY'
import json, os, re, sys
src, dst = sys.argv[1], sys.argv[2]
runs = {}
for f in sorted(os.listdir(src)):
    m = re.match(r'(.+)\.(a|b)\.(\d+)\.json$', f)
    if not m:
        continue
    try:
        v = json.load(open(os.path.join(src, f)))
    except ValueError as e:
        v = {"error": str(e)}
    runs.setdefault(m.group(1), {"a": [], "b": []})[m.group(2)].append(v)
json.dump(runs, open(dst, 'w'), indent=1)
PY
}
run() {  # run SIDE ROUND NAME ARGS...
  local side=$1 round=$2 name=$3; shift 3
  local cmd; if [[ $side == a ]]; then cmd=$a; else cmd=$b; fi
  echo "== $name $side round $round: $cmd $* ($(date +%T))" | tee -a "$out/ab.log"
  # shellcheck disable=SC2086  # the command's words split on purpose
  timeout "$limit" $cmd --bench "$tmp/$name.$side.$round.json" "$@" 2>>"$out/ab.log" </dev/null
  echo "rc=$? $(date +%T)" | tee -a "$out/ab.log"
}
for ((r = 1; r <= rounds; ++r)); do
  while read -r name args; do
    [[ -z $name || $name == \#* ]] && continue
    read -r -a words <<<"$args"
    if ((r % 2)); then first=a second=b; else first=b second=a; fi
    run $first "$r" "$name" "${words[@]}"
    run $second "$r" "$name" "${words[@]}"
    gather
  done <"$list"
done
gather
