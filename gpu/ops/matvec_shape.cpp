// matvec.comp's workgroup shape: the knobs, their defaults and why, and what is chosen per
// product: the split of a row over subgroups, a one-token product's rows a subgroup and unroll.
#include "gpu/ops/matvec_shape.h"

#include <algorithm>
#include <string>

#include "base/check.h"
#include "gpu/context.h"

namespace infer::gpu {
namespace {

// matvec.comp's shape, each field of MatvecTuning left 0 chosen here from the device and format.
// The H200 numbers below: 132 SMs, ~4.3 TB/s, ~1 us a DRAM round trip under load.
//   subgroups_per_group  Default 4: 128 invocations at 32 lanes, room to split a row 4 ways; an
//              SM still holds 8-16 such workgroups.
//   rows_per_subgroup  rows a subgroup (slot) sums. They set how often a lane's activations are
//              reused: a Q4_0 vector carries 32 weights against 128 bytes of x, 4 bytes of L1
//              traffic a weight at one row; at 4.3 TB/s an SM streams ~29 Q4_0 weights a clock,
//              which would take nearly all of its L1's 128 bytes a clock. Staging x in shared
//              memory costs the same bytes, so rows it is: 4 for Q8_0/Q4_0 (gate-up 2, times its
//              two matrices), a quarter of that; bf16 (2 bytes a weight, ~8 weights a clock) 2
//              (gate-up 1).
//   vec_unroll vectors of each row a lane loads in one round, before using any: weights.glsl's
//              VEC_UNROLL (4 f32/bf16, 2 Q8_0/Q4_0, whose scale vectors double the registers):
//              8 16-byte loads a lane in flight, 4 KB a 32-wide subgroup.
//   max_split  most subgroups sharing a row (a divisor of subgroups_per_group; 1: off). Default
//              all of them. The 12B Q4_0 down projection (3840 x 13312) on 2 subgroups of 4 rows
//              a workgroup left ~7 subgroups an SM, each doing 7 rounds of (issue loads, wait,
//              compute) in turn (the Q4_0 matvecs averaged ~1 TB/s). Split 4 ways, each
//              subgroup does 2 rounds and an SM holds 4x the loads in flight; few-row matrices
//              (o, down: 3840 rows) fill the GPU like qkv.
//   split_rounds  a row is split (max_split permitting) until each part takes at most this many
//              rounds. Default 1: every subgroup issues all its loads at once, and many
//              short-lived subgroups keep an SM's loads in flight while others compute, as
//              gate_up_bf16 did at 3.5 TB/s (100 subgroups an SM, in waves) where matvec_bf16
//              (15 an SM, 4-13 rounds each) got 2.4.
//   split_min_groups  a matrix of few rows splits further (while each part still gets a chunk of
//              vectors) until its grid has this many workgroups. Default 256, above the SM count
//              of an H200 (132) or B200 (148): a 1536-row Q4_0 matrix of 2048 columns (one
//              round) keeps the previous shape's 192 workgroups, not 96.
//   tokens_per_group  tokens a workgroup for 1 < T below the tiled kernel's threshold. Default 4.
//   min_grid_subgroups  from gpu/tuning.h's matvec_subgroups_per_core, subgroups a compute core
//              should get from a one-token product on unsplit rows (GpuTuning says why).
constexpr uint32_t kDefaultSubgroups = 4;
constexpr uint32_t kQuantizedSubgroups = 2;  // and max_split 1 (resolve_matvec_shape says why)
constexpr uint32_t kDefaultTokens = 4;
constexpr uint32_t kDefaultSplitRounds = 1;
constexpr uint32_t kDefaultMinGroups = 256;

// A CPU device (lavapipe, SwiftShader) runs a subgroup as one SIMD instruction stream: its
// out-of-order cores and prefetchers keep loads in flight without unrolling, and every extra
// bounds-checked load of a short row is real work. On lavapipe (e2b-mini, 64-wide rows, one
// decode step's products) unroll 1 with the quantized formats' rows took the bf16 matvecs from
// ~290 to ~125 us and gate-up from ~800 to ~240 us (decode step 29 -> 18 ms).
bool cpu_device(const DeviceInfo& info) { return info.type == VK_PHYSICAL_DEVICE_TYPE_CPU; }

uint32_t default_rows_per_subgroup(const DeviceInfo& info, WeightFormat f, bool gate_up) {
  const bool quantized =
      f == WeightFormat::kQ8_0 || f == WeightFormat::kQ4_0 || cpu_device(info);
  if (gate_up) return quantized ? 2 : 1;
  return quantized ? 4 : 2;
}

// Vectors a lane loads per round. Q4_0: 1 (on the H200, against weights.glsl's 2:
// 12B Q4_0 decode 171.9 vs 164.0 t/s, gate-up 33.9 vs 37.4 us; E2B 276 vs 270): its 32 weights a
// vector are long enough work a load, and half the registers leave room for more subgroups.
// Otherwise weights.glsl's VEC_UNROLL (the shader's default for the spec constant).
uint32_t default_vec_unroll(const DeviceInfo& info, WeightFormat f) {
  if (cpu_device(info) || f == WeightFormat::kQ4_0) return 1;
  return f == WeightFormat::kQ8_0 ? 2 : 4;
}

}  // namespace

void resolve_matvec_shape(const DeviceInfo& info, const GpuTuning& tuning, WeightFormat format,
                          bool gate_up, MatvecTuning& t) {
  auto fill = [](uint32_t& field, uint32_t fallback) {
    if (field == 0) field = fallback;
  };
  const uint32_t subgroup = std::max(1u, info.subgroup_size);
  // Q8_0/Q4_0 keep the unsplit 2-subgroup shape: on the H200
  // it ran 12B Q4_0 decode at 157.5 t/s against 152.1 split (gate-up 38.3 vs 40.7 us, the Q8_0
  // head 315 vs 406 us), while bf16 gained from the split (matvec 29.5 vs 32.7 us, gate-up
  // 54.6 vs 58.9).
  const bool quantized = format == WeightFormat::kQ8_0 || format == WeightFormat::kQ4_0;
  fill(t.subgroups_per_group, quantized ? kQuantizedSubgroups : kDefaultSubgroups);
  t.subgroups_per_group =
      std::min(t.subgroups_per_group, std::max(1u, info.max_workgroup_invocations / subgroup));
  fill(t.rows_per_subgroup, default_rows_per_subgroup(info, format, gate_up));
  fill(t.tokens_per_group, kDefaultTokens);
  fill(t.vec_unroll, default_vec_unroll(info, format));
  fill(t.max_split, quantized ? 1 : t.subgroups_per_group);
  t.max_split = std::min(t.max_split, t.subgroups_per_group);
  fill(t.split_rounds, kDefaultSplitRounds);
  fill(t.split_min_groups, kDefaultMinGroups);
  if (t.min_grid_subgroups == 0) {
    t.min_grid_subgroups = tuning.matvec_subgroups_per_core * info.compute_cores;
  }
}

uint32_t matvec_split(const MatvecKernels& k, int64_t rows, int64_t cols) {
  const MatvecTuning& t = k.tuning;
  const int64_t lanes = std::max(1u, k.subgroup_size);
  const int64_t chunks = (device_row_vectors(k.format, cols) + lanes - 1) / lanes;
  const int64_t per_part = int64_t(t.split_rounds) * t.vec_unroll;  // chunks in split_rounds
  uint32_t split = 1;
  for (uint32_t s = 1; s <= t.max_split; ++s) {
    if (t.subgroups_per_group % s != 0) continue;
    if (s > 1 && s > chunks) break;  // parts without a chunk: no rounds saved, no more rows
    split = s;
    const int64_t rows_per_group = int64_t(t.subgroups_per_group / s) * t.rows_per_subgroup;
    const bool rounds_ok = (chunks + s - 1) / s <= per_part;
    if (rounds_ok && (rows + rows_per_group - 1) / rows_per_group >= t.split_min_groups) break;
  }
  return split;
}

OneTokenShape matvec_one_token_shape(const MatvecKernels& k, int64_t rows, int64_t cols) {
  const MatvecTuning& t = k.tuning;
  uint32_t fewest = t.rows_per_subgroup;
  for (const MatvecKernels::OneTokenVariant& v : k.one_token_variants) {
    fewest = std::min(fewest, v.rows_per_subgroup);
  }
  OneTokenShape s{t.rows_per_subgroup, t.vec_unroll, k.one_token.get()};
  while (s.rows_per_subgroup > fewest &&
         (rows + s.rows_per_subgroup - 1) / s.rows_per_subgroup < t.min_grid_subgroups) {
    s.rows_per_subgroup /= 2;
  }
  const int64_t lanes = std::max(1u, k.subgroup_size);
  const int64_t chunks = (device_row_vectors(k.format, cols) + lanes - 1) / lanes;
  auto find = [&](uint32_t rows_per_subgroup, uint32_t unroll) -> const Pipeline* {
    if (rows_per_subgroup == t.rows_per_subgroup && unroll == t.vec_unroll) {
      return k.one_token.get();
    }
    for (const MatvecKernels::OneTokenVariant& v : k.one_token_variants) {
      if (v.rows_per_subgroup == rows_per_subgroup && v.vec_unroll == unroll) {
        return v.pipeline.get();
      }
    }
    return nullptr;
  };
  // One vector a round where that shape was made (unsplit kernels), else the kernel's unroll.
  const Pipeline* single = chunks % t.vec_unroll != 0 ? find(s.rows_per_subgroup, 1) : nullptr;
  if (single != nullptr) {
    s.vec_unroll = 1;
    s.pipeline = single;
  } else {
    s.pipeline = find(s.rows_per_subgroup, t.vec_unroll);
  }
  INFER_CHECK(s.pipeline != nullptr, "matvec: no one-token pipeline of %u rows, unroll %u",
              s.rows_per_subgroup, s.vec_unroll);
  return s;
}

}  // namespace infer::gpu
