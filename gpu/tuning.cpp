// The tuning table: one row a knob (its key, how it reads and prints), driving --gpu-tune's
// parser and the bench JSON alike, so neither can miss a field.
#include "gpu/tuning.h"

#include <cstdlib>
#include <string>

#include "gpu/context.h"

namespace infer::gpu {
namespace {

// A field's value as text and back; parse fails with what the field takes.
struct Field {
  const char* key;
  const char* takes;  // for errors: "a number", "on, off or auto", ...
  bool (*parse)(std::string_view text, GpuTuning& t);
  std::string (*print)(const GpuTuning& t);
};

bool parse_uint(std::string_view text, uint32_t& out, uint32_t lo, uint32_t hi) {
  if (text.empty() || text.size() > 10) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + uint64_t(c - '0');
  }
  if (v < lo || v > hi) return false;
  out = uint32_t(v);
  return true;
}

bool parse_bool(std::string_view text, bool& out) {
  if (text == "on" || text == "1" || text == "true") return out = true, true;
  if (text == "off" || text == "0" || text == "false") return out = false, true;
  return false;
}

bool parse_choice(std::string_view text, Choice& out) {
  if (text == "auto") return out = Choice::kAuto, true;
  bool b = false;
  if (!parse_bool(text, b)) return false;
  out = b ? Choice::kOn : Choice::kOff;
  return true;
}

bool parse_tile(std::string_view text, TileSize& out) {
  const size_t x = text.find('x');
  if (x == std::string_view::npos) return false;
  TileSize t;
  if (!parse_uint(text.substr(0, x), t.rows, 1, 4096) ||
      !parse_uint(text.substr(x + 1), t.tokens, 1, 4096)) {
    return false;
  }
  out = t;
  return true;
}

std::string print_bool(bool b) { return b ? "on" : "off"; }
std::string print_choice(Choice c) {
  return c == Choice::kAuto ? "auto" : c == Choice::kOn ? "on" : "off";
}
std::string print_tile(TileSize t) {
  return std::to_string(t.rows) + "x" + std::to_string(t.tokens);
}

#define INFER_UINT_FIELD(name, lo, hi)                                                       \
  Field {                                                                                    \
    #name, "a whole number from " #lo " to " #hi,                                            \
        [](std::string_view v, GpuTuning& t) { return parse_uint(v, t.name, lo, hi); },      \
        [](const GpuTuning& t) { return std::to_string(t.name); }                            \
  }
#define INFER_BOOL_FIELD(name)                                                             \
  Field {                                                                                  \
    #name, "on or off", [](std::string_view v, GpuTuning& t) { return parse_bool(v, t.name); }, \
        [](const GpuTuning& t) { return print_bool(t.name); }                              \
  }
#define INFER_CHOICE_FIELD(name)                                                            \
  Field {                                                                                   \
    #name, "on, off or auto",                                                               \
        [](std::string_view v, GpuTuning& t) { return parse_choice(v, t.name); },           \
        [](const GpuTuning& t) { return print_choice(t.name); }                             \
  }
#define INFER_TILE_FIELD(name)                                                              \
  Field {                                                                                   \
    #name, "ROWSxTOKENS, e.g. 128x64",                                                      \
        [](std::string_view v, GpuTuning& t) { return parse_tile(v, t.name); },             \
        [](const GpuTuning& t) { return print_tile(t.name); }                               \
  }

const Field kFields[] = {
    INFER_UINT_FIELD(prefill_chunk, 1, 65536),
    INFER_CHOICE_FIELD(int_dot),
    INFER_BOOL_FIELD(int8_from_norm),
    INFER_BOOL_FIELD(int8_from_attention),
    INFER_UINT_FIELD(matvec_subgroups_per_core, 0, 1024),
    INFER_UINT_FIELD(long_row_subgroups, 0, 64),
    INFER_UINT_FIELD(long_row_cols, 1, 1048576),
    INFER_TILE_FIELD(mm_tile),
    INFER_TILE_FIELD(mm_thread),
    INFER_UINT_FIELD(mm_stages, 1, 2),
    INFER_UINT_FIELD(mm_big_min_groups, 1, 1048576),
    INFER_TILE_FIELD(mm_gu_tile),
    INFER_TILE_FIELD(mm_gu_thread),
    INFER_UINT_FIELD(mm_gu_stages, 1, 2),
    INFER_UINT_FIELD(mm_gu_big_min_groups, 1, 1048576),
    INFER_UINT_FIELD(mm_min_tokens, 1, 65536),
    INFER_UINT_FIELD(mm_min_groups, 1, 1048576),
    INFER_TILE_FIELD(coopmat_tile),
    INFER_TILE_FIELD(coopmat_sg),
    INFER_TILE_FIELD(coopmat_gu_tile),
    INFER_TILE_FIELD(coopmat_gu_sg),
    INFER_UINT_FIELD(coopmat_small_below, 0, 1048576),
    INFER_CHOICE_FIELD(attn_split),
    INFER_BOOL_FIELD(attn_prep),
    INFER_UINT_FIELD(attn_split_keys, 1, 1048576),
    INFER_UINT_FIELD(attn_split_heads, 1, 64),
    Field{"attn_split_tile", "8, 16 or 32",
          [](std::string_view v, GpuTuning& t) {
            uint32_t x = 0;
            if (!parse_uint(v, x, 8, 32) || (x != 8 && x != 16 && x != 32)) return false;
            t.attn_split_tile = x;
            return true;
          },
          [](const GpuTuning& t) { return std::to_string(t.attn_split_tile); }},
    INFER_UINT_FIELD(attn_keys_per_subgroup, 1, 8),
    INFER_UINT_FIELD(attn_score_groups, 1, 65535),
    INFER_UINT_FIELD(attn_pv_dims, 1, 512),
    INFER_UINT_FIELD(attn_pv_invocations, 1, 1024),
    INFER_UINT_FIELD(attn_pv_unroll, 1, 16),
    INFER_UINT_FIELD(attn_pv_keys, 0, 1048576),
    INFER_UINT_FIELD(attn_pv_splits, 1, 64),
    Field{"attn_prefill", "tiled or old",
          [](std::string_view v, GpuTuning& t) {
            if (v == "tiled") return t.attn_prefill = PrefillAttention::kTiled, true;
            if (v == "old") return t.attn_prefill = PrefillAttention::kOld, true;
            return false;
          },
          [](const GpuTuning& t) -> std::string {
            return t.attn_prefill == PrefillAttention::kOld ? "old" : "tiled";
          }},
    INFER_UINT_FIELD(attn_prefill_rows, 0, 256),
    INFER_UINT_FIELD(attn_prefill_tile, 0, 1024),
    INFER_UINT_FIELD(attn_prefill_keys, 1, 1048576),
    INFER_UINT_FIELD(attn_prefill_shared, 1024, 1048576),
};

#undef INFER_UINT_FIELD
#undef INFER_BOOL_FIELD
#undef INFER_CHOICE_FIELD
#undef INFER_TILE_FIELD

const Field* find_field(std::string_view key) {
  for (const Field& f : kFields) {
    if (key == f.key) return &f;
  }
  return nullptr;
}

}  // namespace

GpuTuning default_tuning(const DeviceInfo& info) {
  GpuTuning t;
  if (info.compute_cores >= 64) t.prefill_chunk = 512;
  // Half cooperative tiles below 3/4 of a wave of full ones (H100, 132 SMs, Q4_0: E2B, whose
  // 1,536- and 2,048-row products make 48-64 full tiles, 15,212 -> 17,569 t/s with the half tile
  // below 132 tiles; 12B's 3,840-row ones make 120 and lose with it, 5,300 -> 4,737).
  t.coopmat_small_below = info.compute_cores * 3 / 4;
  if (info.compute_cores == 0)
    t.matvec_subgroups_per_core = 0;  // nothing to count subgroups against
  return t;
}

Result<TuningOverrides> parse_gpu_tune(std::string_view spec) {
  TuningOverrides out;
  GpuTuning probe;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string_view item = spec.substr(start, comma - start);
    start = comma + 1;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return make_error(ErrorCode::kInvalidArgument,
                        "--gpu-tune: \"" + std::string(item) + "\" is not key=value");
    }
    const std::string key(item.substr(0, eq)), value(item.substr(eq + 1));
    const Field* f = find_field(key);
    if (f == nullptr) {
      std::string keys;
      for (const Field& k : kFields) keys += std::string(keys.empty() ? "" : ", ") + k.key;
      return make_error(ErrorCode::kInvalidArgument,
                        "--gpu-tune: unknown key \"" + key + "\" (keys: " + keys + ")");
    }
    if (!f->parse(value, probe)) {
      return make_error(ErrorCode::kInvalidArgument, "--gpu-tune: " + key + "=\"" + value +
                                                         "\": " + key + " takes " + f->takes);
    }
    out.emplace_back(key, value);
  }
  return out;
}

Result<void> apply_tuning(const TuningOverrides& overrides, GpuTuning& t) {
  for (const auto& [key, value] : overrides) {
    const Field* f = find_field(key);
    if (f == nullptr || !f->parse(value, t)) {
      return make_error(ErrorCode::kInvalidArgument,
                        "--gpu-tune: " + key + "=\"" + value + "\" is not a tuning override");
    }
  }
  return Ok{};
}

std::vector<std::pair<std::string, std::string>> tuning_fields(const GpuTuning& t) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Field& f : kFields) out.emplace_back(f.key, f.print(t));
  return out;
}

}  // namespace infer::gpu
