#!/usr/bin/env bash
# Which products make the cooperative-matrix prefill miss e2b-long's prompt logits (issue 3):
# the forward test under INFER_COOPMAT=1 with coop narrowed by INFER_COOP_ONLY / _MIN_ROWS.
# Usage (device machine): scripts/device/coop_bisect.sh OUT_FILE
out=$1
for narrow in "" INFER_COOP_ONLY=plain INFER_COOP_ONLY=gate_up INFER_COOP_MIN_ROWS=500 \
              INFER_COOP_MIN_ROWS=100 INFER_COOP_LO=none; do
  echo "== coop ${narrow:-all}" >>"$out"
  # shellcheck disable=SC2086  # narrow is one VAR=VALUE word or none
  timeout 60 env INFER_COOPMAT=1 $narrow INFER_TEST_NO_VALIDATION=1 \
    INFER_TEST_FIXTURES="$PWD/test/fixtures" .bundle/run.sh gpu_test \
    --gtest_filter='*PromptLogits*E2bLong*:*PromptLogits*E2bMini*' 2>&1 |
    grep -E "^\[ +(OK|FAILED) +\]|Which is|actual|Expected|chunk" >>"$out"
done
