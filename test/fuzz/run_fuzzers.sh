#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) in build-fuzz/ and runs each for SECONDS
# from its seed corpus. Exits non-zero if any target crashes, leaks or trips a sanitizer.
# Usage: test/fuzz/run_fuzzers.sh SECONDS [BUILD_DIR]
set -uo pipefail
seconds="${1:?usage: run_fuzzers.sh SECONDS [BUILD_DIR]}"
cd "$(dirname "$0")/../.."
build="${2:-build-fuzz}"
if [ ! -f "$build/build.ninja" ]; then
  CXX=clang++ meson setup "$build" -Dfuzz=true -Dtests=false -Db_sanitize=address,undefined \
    -Db_lundef=false --buildtype=debugoptimized --wrap-mode=nodownload >/dev/null || exit 1
fi
ninja -C "$build" -j2 test/fuzz/safetensors_fuzz test/fuzz/config_fuzz test/fuzz/tokenizer_fuzz \
  test/fuzz/protocol_fuzz test/fuzz/episode_store_fuzz test/fuzz/path_resolver_fuzz \
  test/fuzz/tool_call_fuzz test/fuzz/ansi_strip_fuzz || exit 1

export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
# One target for SECONDS; its outcome in $build/fuzz-$target.status, its report printed after.
run_one() {
  local target=$1
  local corpus="$build/fuzz-corpus/$target"  # grows across runs; the seeds stay read-only in git
  mkdir -p "$corpus" "$build/fuzz-crashes/$target"
  if "$build/test/fuzz/${target}_fuzz" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
      -timeout=10 -print_final_stats=1 -artifact_prefix="$build/fuzz-crashes/$target/" \
      "$corpus" "test/fuzz/corpus/$target" 2>"$build/fuzz-$target.log"; then
    echo ok >"$build/fuzz-$target.status"
  else
    echo failed >"$build/fuzz-$target.status"
  fi
}
# Two at a time: each target is one process on one core, and CI has two.
status=0
targets=(safetensors config tokenizer protocol episode_store path_resolver tool_call ansi_strip)
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  for target in "${targets[@]:i:2}"; do
    echo "== ${target}_fuzz for ${seconds}s"
    run_one "$target" &
  done
  wait
done
for target in "${targets[@]}"; do
  if [ "$(cat "$build/fuzz-$target.status" 2>/dev/null)" != ok ]; then
    echo "FAILED: ${target}_fuzz (log: $build/fuzz-$target.log, inputs: $build/fuzz-crashes/$target/)"
    tail -40 "$build/fuzz-$target.log"
    status=1
  else
    echo "${target}_fuzz:"
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$build/fuzz-$target.log"
  fi
done
exit $status
