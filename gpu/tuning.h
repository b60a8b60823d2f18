// Every knob of the GPU backend that survived its measurements, in one typed struct: defaults
// chosen once from the device report (default_tuning), overridden only by --gpu-tune
// key=value,... (parse_gpu_tune), printed whole in the bench JSON (tuning_fields). The kernels
// read it from the VulkanContext when they are made; nothing reads the environment for it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace infer::gpu {

struct DeviceInfo;

// A decision a model or shape may make: kAuto leaves it to the rule the field states.
enum class Choice : uint32_t { kAuto, kOn, kOff };

// Rows x tokens of a tile (or a thread's share of one); 0 x 0 only where a field says so.
struct TileSize {
  uint32_t rows = 0;
  uint32_t tokens = 0;
  bool operator==(const TileSize&) const = default;
};

// Prefill attention: the register-blocked tiled kernel (attend_tiled.comp) or attend.comp.
enum class PrefillAttention : uint32_t { kTiled, kOld };

struct GpuTuning {
  // Tokens a prefill chunk (--prefill-chunk): 512 on a GPU of 64 or more compute cores, else 256.
  // On the H200 (132 SMs) a chunk of 256 leaves E2B's 1,536- and 2,048-row products grids of
  // 48-128 workgroups; with 512 its Q4_0 prefill went 5,531 -> 7,756-8,178 t/s, 12B Q4_0 1,905 ->
  // 1,999. A small GPU is already full at 256, and a bigger chunk holds bigger activation buffers
  // and only delays what waits behind it.
  uint32_t prefill_chunk = 256;
  // Q8_0/Q4_0 one-token products on integer dots, x quantized once a product (by the add_norm
  // before it where there is one). kAuto: on where the device has shaderIntegerDotProduct and the
  // model's hidden_size >= 3072. Side by side on the H200: 12B Q4_0 190.4 / 190.0 t/s against
  // 178.4 in f32 (its products 13.8 us against 17.7), Q8_0 152.6 against 144.5; E2B Q4_0 (1536
  // wide) 291-305 against 340-349: its products no faster, the quantizing dispatches cost more
  // than they save. E4B (2560) is unmeasured and stays in f32.
  Choice int_dot = Choice::kAuto;
  // The integer-dot products' int8 x written by the add_norm before them instead of a dispatch
  // of their own (H200: add_norm 7.7 us with the copy against 6.0, the dispatch it saves 4.7).
  bool int8_from_norm = true;
  // The o projection's int8 x written by the split decode attention (with int8_from_norm: 12B
  // Q4_0 190.3 / 188.1 t/s against 187.3 with every int8 input from a dispatch of its own).
  bool int8_from_attention = true;

  // One-token products on unsplit rows (matvec.comp): while the grid has fewer than
  // matvec_subgroups_per_core subgroups a compute core, a subgroup sums half the rows (down to 1).
  // 12 where the driver says how many cores the device has (H200, 132 SMs: E2B Q4_0 decode 270 ->
  // 302 t/s with 1 row a subgroup against 4, 2 rows 296; 12B's 3840-row o took 11.2 us on 2 rows,
  // 11.8 on 4; its 8192-row q 15.8 on 4, 16.5 on 2), else 0 (off).
  uint32_t matvec_subgroups_per_core = 12;
  // f32/bf16 products of rows of at least long_row_cols columns (12B's down projection, E2B's
  // double-wide ones) on workgroups of long_row_subgroups subgroups (0: off). H200: 12B bf16
  // 120.3 / 121.1 t/s against 119.6 / 119.6 on 4, E2B bf16 286.4 against 283.4; Q8_0/Q4_0 do
  // not split a row, so they keep their shape.
  uint32_t long_row_subgroups = 8;
  uint32_t long_row_cols = 8192;

  // The tiled prefill kernel (matmul.comp, gpu/ops/matmul_tuning.cpp says why these): plain
  // products, then gate-up; the default tiles are halved while the device cannot hold them.
  TileSize mm_tile{128, 128};
  TileSize mm_thread{8, 8};
  uint32_t mm_stages = 1;
  uint32_t mm_big_min_groups = 128;  // a grid of fewer big tiles takes the quarter tile
  TileSize mm_gu_tile{64, 128};
  TileSize mm_gu_thread{4, 8};
  uint32_t mm_gu_stages = 1;
  uint32_t mm_gu_big_min_groups = 128;
  // The switch from matvec.comp to the tiled kernel (counted in quarter tiles).
  uint32_t mm_min_tokens = 16;
  uint32_t mm_min_groups = 64;
  // The cooperative-matrix prefill through VK_KHR_cooperative_matrix (matmul_coopmat.comp): the
  // workgroup's tile and each subgroup's share of it (multiples of 16), plain products, then
  // gate-up (rows of each matrix).
  TileSize coopmat_tile{128, 128};
  TileSize coopmat_sg{32, 64};
  TileSize coopmat_gu_tile{64, 128};
  TileSize coopmat_gu_sg{16, 64};
  // A product whose grid of those tiles has fewer workgroups than this takes tiles of half the
  // rows (subgroups of half the tokens), so that a few thousand rows still fill a big GPU.
  uint32_t coopmat_small_below = 0;

  // Decode attention: the one-dispatch split kernel (attention_split.cpp) or the two passes.
  // kAuto: split up to head dim 256, two passes above (H200 at 640 keys: d 256 12.2 us against
  // 8.9 + 8.8 for E2B, d 512 29.2 against 22.6 for 12B).
  Choice attn_split = Choice::kAuto;
  // qkv_prep folded into the split decode (H200: E2B Q4_0 342.7 / 344.7 t/s against 337.9
  // apart, 12B Q4_0 178.2 / 177.2 against 175.7).
  bool attn_prep = true;
  uint32_t attn_split_keys = 16;   // keys a split at least (rounded up to 16)
  uint32_t attn_split_heads = 1;   // query heads a workgroup at most, of one KV head
  uint32_t attn_split_tile = 32;   // keys a tile up to d 256: 8, 16 or 32
  // The two passes (attention_decode.cpp): keys a subgroup loads a round, workgroups a head group
  // at most; V dims a workgroup, its invocations, V rows a round, keys a range at least (0: one
  // round), ranges at most.
  uint32_t attn_keys_per_subgroup = 2;
  uint32_t attn_score_groups = 256;
  uint32_t attn_pv_dims = 32;
  uint32_t attn_pv_invocations = 256;
  uint32_t attn_pv_unroll = 8;
  uint32_t attn_pv_keys = 0;
  uint32_t attn_pv_splits = 64;
  // Prefill attention (attention_prefill.cpp): the kernel; the tiled one's query rows and keys a
  // tile (0: by head dim), keys a split at least, shared memory a workgroup at most.
  PrefillAttention attn_prefill = PrefillAttention::kTiled;
  uint32_t attn_prefill_rows = 0;
  uint32_t attn_prefill_tile = 0;
  uint32_t attn_prefill_keys = 128;
  uint32_t attn_prefill_shared = 49152;
};

// The defaults for this device (matvec_subgroups_per_core off where the driver does not count its
// cores).
GpuTuning default_tuning(const DeviceInfo& info);

// --gpu-tune's value: "key=value,key=value" with the keys tuning_fields() lists. Each override
// is checked against a GpuTuning (unknown key, malformed or out-of-range value: an error naming
// the key and what it takes) and kept as text, to be applied to the device's defaults.
using TuningOverrides = std::vector<std::pair<std::string, std::string>>;
Result<TuningOverrides> parse_gpu_tune(std::string_view spec);
Result<void> apply_tuning(const TuningOverrides& overrides, GpuTuning& t);

// Every field as (key, value text), in declaration order: the bench JSON's gpu_tuning.
std::vector<std::pair<std::string, std::string>> tuning_fields(const GpuTuning& t);

}  // namespace infer::gpu
