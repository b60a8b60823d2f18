// The tiled prefill kernel's shape: defaults, INFER_MM_* knobs, device limits (matmul_tuning.h).
#include "gpu/ops/matmul_tuning.h"

#include <cstdlib>
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
// some. The H200 knobs, read once at pipeline creation where the tuning leaves them 0:
// INFER_MM_TILE=128x64 (rows x tokens), INFER_MM_THREAD=8x4, INFER_MM_STAGES=1|2,
// INFER_MM_BIG_MIN_GROUPS=128 for plain products; INFER_MM_GU_TILE, INFER_MM_GU_THREAD,
// INFER_MM_GU_STAGES, INFER_MM_GU_BIG_MIN_GROUPS for gate-up; INFER_MM_MIN_TOKENS and
// INFER_MM_MIN_GROUPS for the switch from matvec.comp (below, counted in quarter tiles).
// The switch: measured on an H200 with the old 64 x 64 tile (Q4_0/Q8_0/bf16, 6144x1536,
// 1536x6144, 21504x5376), the tiled kernel won from T = 16 when its grid had ~100+ workgroups,
// but with 24 (1536 rows) only from T = 64; the matvec kernel streams W once per 4 tokens and
// wins below.
constexpr uint32_t kDefaultMatmulMinTokens = 16;
constexpr uint32_t kDefaultMatmulMinGroups = 64;
constexpr TileShape kDefaultTile{128, 128, 8, 8, 1};
constexpr TileShape kDefaultGateUpTile{64, 128, 4, 8, 1};
constexpr uint32_t kDefaultBigTileMinGroups = 128;
// matmul_coop.comp: 128 x 64 (rows x tokens, 8 subgroups) plain, 64 x 64 gate-up (two matrices).
constexpr uint32_t kDefaultCoopRows = 128, kDefaultCoopGateUpRows = 64, kDefaultCoopTokens = 64;

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

// Reads "AxB" from the environment into a and b where both are 0; a value that is not two
// positive numbers is an error (a sweep should not silently run the default).
Result<void> env_pair(const char* name, uint32_t& a, uint32_t& b) {
  const char* v = std::getenv(name);
  if (v == nullptr || a != 0 || b != 0) return Ok{};
  unsigned x = 0, y = 0;
  char tail = 0;
  if (std::sscanf(v, "%ux%u%c", &x, &y, &tail) != 2 || x == 0 || y == 0) {
    return make_error(ErrorCode::kUnsupported,
                      std::string(name) + "=\"" + v + "\": expected ROWSxTOKENS, e.g. 128x64");
  }
  a = x;
  b = y;
  return Ok{};
}

void env_number(const char* name, uint32_t& a) {
  const char* v = std::getenv(name);
  if (v != nullptr && a == 0) a = uint32_t(std::strtoul(v, nullptr, 10));
}

// Fills the tiled kernel's zeros from the environment, then from the defaults, halving a default
// tile while the device cannot hold it (workgroup invocations or shared memory), and checks the
// shape is one the shader can run.
}  // namespace

Result<void> resolve_matmul_tuning(const VulkanContext& ctx, bool gate_up, MatvecTuning& t) {
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(ctx.physical_device(), &props);
  const uint32_t max_shared = props.limits.maxComputeSharedMemorySize;
  const uint32_t max_invocations =
      std::min(ctx.info().max_workgroup_invocations, props.limits.maxComputeWorkGroupSize[0]);
  INFER_TRY_VOID(env_pair(gate_up ? "INFER_MM_GU_TILE" : "INFER_MM_TILE", t.tile_rows,
                          t.tile_tokens));
  INFER_TRY_VOID(env_pair(gate_up ? "INFER_MM_GU_THREAD" : "INFER_MM_THREAD", t.thread_rows,
                          t.thread_tokens));
  env_number(gate_up ? "INFER_MM_GU_STAGES" : "INFER_MM_STAGES", t.tile_stages);
  env_number(gate_up ? "INFER_MM_GU_BIG_MIN_GROUPS" : "INFER_MM_BIG_MIN_GROUPS",
             t.tile_min_groups);
  env_number("INFER_MM_MIN_TOKENS", t.matmul_min_tokens);
  env_number("INFER_MM_MIN_GROUPS", t.matmul_min_groups);
  const TileShape& d = gate_up ? kDefaultGateUpTile : kDefaultTile;
  const bool defaults = t.tile_rows == 0 && t.tile_tokens == 0;
  if (t.matmul_min_tokens == 0) t.matmul_min_tokens = kDefaultMatmulMinTokens;
  if (t.matmul_min_groups == 0) t.matmul_min_groups = kDefaultMatmulMinGroups;
  if (t.tile_rows == 0) t.tile_rows = d.rows;
  if (t.tile_tokens == 0) t.tile_tokens = d.tokens;
  if (t.thread_rows == 0) t.thread_rows = d.thread_rows;
  if (t.thread_tokens == 0) t.thread_tokens = d.thread_tokens;
  if (t.tile_stages == 0) t.tile_stages = d.stages;
  if (t.tile_min_groups == 0) t.tile_min_groups = kDefaultBigTileMinGroups;
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

uint32_t coop_subgroups(const MatvecTuning& t, bool gate_up) {
  return t.coop_tokens / 32 * (t.coop_rows / (gate_up ? 16 : 32));
}

namespace {

// matmul_coop.comp's shared memory: x hi and lo and W as padded f16 rows of a step, the block
// scales of a step (quantized), one 16 x 16 f32 edge fragment a subgroup.
uint32_t coop_shared_bytes(const MatvecTuning& t, bool gate_up, bool scaled) {
  const uint32_t mats = gate_up ? 2 : 1;
  const uint32_t stride = INFER_MATMUL_COOP_COLS + INFER_MATMUL_COOP_PAD;
  const uint32_t blocks = INFER_MATMUL_COOP_COLS / 32;
  return 2 * 2 * t.coop_tokens * stride + 2 * mats * t.coop_rows * stride +
         (scaled ? 4 * mats * blocks * t.coop_rows : 0) + coop_subgroups(t, gate_up) * 16 * 16 * 4;
}

// INFER_COOP_LO's value; kAuto for one it does not name.
CoopLo coop_lo_named(const std::string& v) {
  if (v.empty() || v == "shared") return CoopLo::kShared;
  if (v == "apart") return CoopLo::kApart;
  if (v == "none") return CoopLo::kNone;
  return CoopLo::kAuto;
}

}  // namespace

Result<bool> resolve_coop_tuning(const VulkanContext& ctx, WeightFormat format, bool gate_up,
                                 MatvecTuning& t) {
  const DeviceInfo& info = ctx.info();
  if (!info.coop_matrix_nv || format == WeightFormat::kF32) return false;  // f32: 24 bits
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(ctx.physical_device(), &props);
  const bool defaults = t.coop_rows == 0 && t.coop_tokens == 0;
  INFER_TRY_VOID(env_pair(gate_up ? "INFER_COOP_GU_TILE" : "INFER_COOP_TILE", t.coop_rows,
                          t.coop_tokens));
  if (t.coop_lo == CoopLo::kAuto) {
    const char* v = std::getenv("INFER_COOP_LO");
    const std::string lo = v != nullptr ? v : "";
    t.coop_lo = coop_lo_named(lo);
    if (t.coop_lo == CoopLo::kAuto) {
      return make_error(ErrorCode::kUnsupported,
                        "INFER_COOP_LO=\"" + lo + "\": expected none, shared or apart");
    }
  }
  if (t.coop_rows == 0) t.coop_rows = gate_up ? kDefaultCoopGateUpRows : kDefaultCoopRows;
  if (t.coop_tokens == 0) t.coop_tokens = kDefaultCoopTokens;
  const bool scaled = format == WeightFormat::kQ8_0 || format == WeightFormat::kQ4_0;
  const uint32_t invocations = coop_subgroups(t, gate_up) * info.subgroup_size;
  // Each invocation stages whole rounds of the tiles' quads (16 a row of a step).
  const uint32_t quads = INFER_MATMUL_COOP_COLS / 4;
  const bool fits =
      info.subgroup_size == 32 && t.coop_rows % 32 == 0 && t.coop_tokens % 32 == 0 &&
      t.coop_rows * quads % invocations == 0 && t.coop_tokens * quads % invocations == 0 &&
      invocations <=
          std::min(info.max_workgroup_invocations, props.limits.maxComputeWorkGroupSize[0]) &&
      coop_shared_bytes(t, gate_up, scaled) <= props.limits.maxComputeSharedMemorySize;
  if (!fits && !defaults) {
    return make_error(ErrorCode::kUnsupported,
                      "cooperative-matrix tile " + std::to_string(t.coop_rows) + "x" +
                          std::to_string(t.coop_tokens) +
                          " (multiples of 32, subgroups of 32, whose quads divide among the "
                          "invocations) does not fit the device");
  }
  return fits;
}

}  // namespace infer::gpu
