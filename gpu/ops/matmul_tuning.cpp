// The tiled prefill kernel's shape: defaults (GpuTuning's mm_* and coop_*), device limits
// (matmul_tuning.h).
#include "gpu/ops/matmul_tuning.h"

#include <string>

#include "shaders/matvec.h"

namespace infer::gpu {
namespace {

// Tiled defaults (shaders/matmul.comp): a register-blocked SIMT GEMM. Plain products 128 x 128
// outputs a workgroup, 8 x 8 an invocation (256 invocations; per column 4 vec4 shared reads feed
// 64 FMAs); gate-up 64 x 128 at 4 x 8 per matrix (the same 64 sums and 256 invocations, two
// matrices staged). 32 KB of shared memory either way, one buffer: the next step's loads wait in
// registers during the FMAs. Halved while the device cannot hold them. A product whose grid of
// these has fewer than 128 workgroups (a 3840-row projection of a 256-token chunk: 60) takes the
// quarter tile, 64 x 64 by 4 x 4 (small_tile()): 4x the workgroups, so a big GPU's SMs each get
// some. The values are gpu/tuning.h's mm_* fields, taken where MatvecTuning leaves them 0.
// The switch from matvec.comp (mm_min_tokens, mm_min_groups, counted in quarter tiles): measured
// on an H200 with the old 64 x 64 tile (Q4_0/Q8_0/bf16, 6144x1536, 1536x6144, 21504x5376), the
// tiled kernel won from T = 16 when its grid had ~100+ workgroups, but with 24 (1536 rows) only
// from T = 64; the matvec kernel streams W once per 4 tokens and wins below.
}  // namespace

// The quarter tile of t: the thread tile's larger dimension (>= 8) halved, twice, with the tile's,
// so the invocations stay and each sums a quarter of the outputs (a dimension of 4 stays: vec4
// reads). Equal to t's where nothing halves.
TileShape small_tile(const MatvecTuning& t) {
  TileShape s{t.tile_rows, t.tile_tokens, t.thread_rows, t.thread_tokens, t.tile_stages};
  for (int i = 0; i < 2; ++i) {
    if (s.thread_tokens >= s.thread_rows && s.thread_tokens >= 8) {
      s.thread_tokens /= 2;
      s.tokens /= 2;
    } else if (s.thread_rows >= 8) {
      s.thread_rows /= 2;
      s.rows /= 2;
    }
  }
  return s;
}

namespace {

uint32_t matmul_shared_bytes(const MatvecTuning& t, bool gate_up) {
  const uint32_t mats = gate_up ? 2 : 1;
  return t.tile_stages * 4 * INFER_MATMUL_TILE_COLS * (mats * t.tile_rows + t.tile_tokens);
}

}  // namespace

// Fills the tiled kernel's zeros from the context's tuning, halving the default tile while the
// device cannot hold it (workgroup invocations or shared memory), and checks the shape is one
// the shader can run.
Result<void> resolve_matmul_tuning(const VulkanContext& ctx, bool gate_up, MatvecTuning& t) {
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(ctx.physical_device(), &props);
  const uint32_t max_shared = props.limits.maxComputeSharedMemorySize;
  const uint32_t max_invocations =
      std::min(ctx.info().max_workgroup_invocations, props.limits.maxComputeWorkGroupSize[0]);
  const GpuTuning& g = ctx.tuning();
  const TileSize tile = gate_up ? g.mm_gu_tile : g.mm_tile;
  const TileSize thread = gate_up ? g.mm_gu_thread : g.mm_thread;
  const GpuTuning d;  // the default tile halves to fit; a tile asked for does not
  const bool defaults = t.tile_rows == 0 && t.tile_tokens == 0 &&
                        tile == (gate_up ? d.mm_gu_tile : d.mm_tile);
  if (t.matmul_min_tokens == 0) t.matmul_min_tokens = g.mm_min_tokens;
  if (t.matmul_min_groups == 0) t.matmul_min_groups = g.mm_min_groups;
  if (t.tile_rows == 0) t.tile_rows = tile.rows;
  if (t.tile_tokens == 0) t.tile_tokens = tile.tokens;
  if (t.thread_rows == 0) t.thread_rows = thread.rows;
  if (t.thread_tokens == 0) t.thread_tokens = thread.tokens;
  if (t.tile_stages == 0) t.tile_stages = gate_up ? g.mm_gu_stages : g.mm_stages;
  if (t.tile_min_groups == 0) {
    t.tile_min_groups = gate_up ? g.mm_gu_big_min_groups : g.mm_big_min_groups;
  }
  auto invocations = [&] {
    return (t.tile_rows / t.thread_rows) * (t.tile_tokens / t.thread_tokens);
  };
  while (defaults && (invocations() > max_invocations ||
                      matmul_shared_bytes(t, gate_up) > max_shared)) {
    if (t.tile_tokens >= t.tile_rows && t.tile_tokens > t.thread_tokens) {
      t.tile_tokens /= 2;
    } else if (t.tile_rows > t.thread_rows) {
      t.tile_rows /= 2;
    } else {
      break;
    }
  }
  if (t.thread_rows % 4 != 0 || t.thread_tokens % 4 != 0 || t.tile_rows % t.thread_rows != 0 ||
      t.tile_tokens % t.thread_tokens != 0 || (t.tile_stages != 1 && t.tile_stages != 2) ||
      invocations() > max_invocations || matmul_shared_bytes(t, gate_up) > max_shared) {
    return make_error(ErrorCode::kUnsupported,
                      "matmul tile " + std::to_string(t.tile_rows) + "x" +
                          std::to_string(t.tile_tokens) + " by " + std::to_string(t.thread_rows) +
                          "x" + std::to_string(t.thread_tokens) + " (multiples of 4), " +
                          std::to_string(t.tile_stages) + " stage(s) needs " +
                          std::to_string(invocations()) + " invocations and " +
                          std::to_string(matmul_shared_bytes(t, gate_up)) +
                          " bytes of shared memory; the device allows " +
                          std::to_string(max_invocations) + " and " + std::to_string(max_shared));
  }
  return Ok{};
}

uint32_t coop_subgroups(const MatvecTuning& t) {
  return (t.coop_rows / t.coop_sg_rows) * (t.coop_tokens / t.coop_sg_tokens);
}

namespace {

// matmul_coopmat.comp's shared memory: x and W as padded f16 rows of a step, one 16 x 16 f32 edge
// fragment a subgroup.
uint32_t coop_shared_bytes(const MatvecTuning& t, bool gate_up) {
  const uint32_t mats = gate_up ? 2 : 1;
  const uint32_t stride = INFER_MATMUL_COOP_COLS + INFER_MATMUL_COOP_PAD;
  return 2 * (t.coop_tokens + mats * t.coop_rows) * stride + coop_subgroups(t) * 16 * 16 * 4;
}

}  // namespace

Result<bool> resolve_coop_tuning(const VulkanContext& ctx, WeightFormat format, bool gate_up,
                                 MatvecTuning& t) {
  const DeviceInfo& info = ctx.info();
  // f32 weights keep the f32 tiles: their 24 bits do not fit f16.
  if (!info.coop_matrix_khr || format == WeightFormat::kF32) return false;
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(ctx.physical_device(), &props);
  const GpuTuning& g = ctx.tuning();
  const TileSize tile = gate_up ? g.coopmat_gu_tile : g.coopmat_tile;
  const TileSize sg = gate_up ? g.coopmat_gu_sg : g.coopmat_sg;
  const GpuTuning d;  // the default tile may not fit (then no cooperative kernel); one asked for
  const bool defaults = t.coop_rows == 0 && t.coop_tokens == 0 && t.coop_sg_rows == 0 &&
                        tile == (gate_up ? d.coopmat_gu_tile : d.coopmat_tile) &&
                        sg == (gate_up ? d.coopmat_gu_sg : d.coopmat_sg);
  if (t.coop_rows == 0) t.coop_rows = tile.rows;
  if (t.coop_tokens == 0) t.coop_tokens = tile.tokens;
  if (t.coop_sg_rows == 0) t.coop_sg_rows = sg.rows;
  if (t.coop_sg_tokens == 0) t.coop_sg_tokens = sg.tokens;
  const bool shape = t.coop_sg_rows % 16 == 0 && t.coop_sg_tokens % 16 == 0 &&
                     t.coop_sg_rows != 0 && t.coop_sg_tokens != 0 &&
                     t.coop_rows % t.coop_sg_rows == 0 && t.coop_tokens % t.coop_sg_tokens == 0;
  const uint32_t invocations = shape ? coop_subgroups(t) * info.subgroup_size : 0;
  // Each invocation stages whole rounds of the tiles' quads (16 a row of a step).
  const uint32_t quads = INFER_MATMUL_COOP_COLS / 4;
  const bool fits =
      shape && t.coop_rows * quads % invocations == 0 && t.coop_tokens * quads % invocations == 0 &&
      invocations <=
          std::min(info.max_workgroup_invocations, props.limits.maxComputeWorkGroupSize[0]) &&
      coop_shared_bytes(t, gate_up) <= props.limits.maxComputeSharedMemorySize;
  if (!fits && !defaults) {
    return make_error(ErrorCode::kUnsupported,
                      "cooperative-matrix tile " + std::to_string(t.coop_rows) + "x" +
                          std::to_string(t.coop_tokens) + " of subgroup tiles " +
                          std::to_string(t.coop_sg_rows) + "x" + std::to_string(t.coop_sg_tokens) +
                          " (multiples of 16 that divide it, whose quads divide among the "
                          "invocations) does not fit the device");
  }
  return fits;
}

}  // namespace infer::gpu
