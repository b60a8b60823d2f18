#!/usr/bin/env bash
# The GPU tests that the cooperative-matrix prefill touches, with it on (the default where the
# device offers VK_NV_cooperative_matrix; INFER_COOPMAT=1 kept for older binaries), on the
# device machine: matvec / matmul / gate-up against the CPU reference, every fixture's forward.
# Usage: scripts/device/coop_tests.sh OUT_FILE
INFER_COOPMAT=1 INFER_TEST_NO_VALIDATION=1 INFER_TEST_FIXTURES="$PWD/test/fixtures" \
  timeout 300 .bundle/run.sh gpu_test \
  --gtest_filter='*Matvec*:*Matmul*:*GateUp*:*Mlp*:ForwardFixtures/*:*ForwardGpuVocab*' >"$1" 2>&1
echo "rc=$?" >>"$1"
