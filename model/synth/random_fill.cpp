// Counter-based random fill of synthetic tensors (splitmix64 over the element index).
#include "model/synth/random_fill.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/half.h"

namespace infer {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// The splitmix64 output function (Steele, Lea, Flood 2014): a bijective 64-bit mixer.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// FNV-1a over the name: a stable tensor identifier.
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

FillRule uniform_with_std(float center, double stddev) {
  return FillRule{center, static_cast<float>(stddev * std::sqrt(3.0))};
}

// Element i is center + half_width·(2u - 1), u from the top 24 bits of mix64(key + (i+1)·golden):
// the splitmix64 stream of `key`, read at position i.
template <class T, class Convert>
void fill_as(uint64_t key, FillRule rule, int64_t begin, int64_t end, uint8_t* out,
             Convert convert) {
  const float scale = 2.0f * rule.half_width / 16777216.0f;  // 24 random bits -> [0, 2·hw)
  const float offset = rule.center - rule.half_width + 0.5f * scale;
  for (int64_t i = begin; i < end; ++i) {
    const uint64_t z = mix64(key + static_cast<uint64_t>(i + 1) * kGolden);
    const T v = convert(offset + scale * static_cast<float>(z >> 40));
    std::memcpy(out + sizeof(T) * static_cast<size_t>(i - begin), &v, sizeof(T));
  }
}

}  // namespace

FillRule fill_rule(const TensorSpec& spec, const TextConfig& tc) {
  switch (spec.kind) {
    case TensorKind::kNorm:
    case TensorKind::kScalar:
      return FillRule{1.0f, 0.1f};
    case TensorKind::kVector:
      return contains(spec.name, "bias") ? FillRule{0.0f, 0.02f} : FillRule{1.0f, 0.1f};
    case TensorKind::kEmbedding:
      if (spec.name == "embed_tokens_per_layer.weight") {
        // The row is [L, P]: each layer's slice is scaled by √P (§4.3).
        return uniform_with_std(0.0f, 1.0 / std::sqrt(std::max(tc.hidden_size_per_layer_input, 1)));
      }
      return uniform_with_std(0.0f, 2.0 / std::sqrt(std::max(tc.hidden_size, 4)));
    case TensorKind::kMatrix:
    case TensorKind::kExperts:
      break;
  }
  if (contains(spec.name, "router.proj")) return uniform_with_std(0.0f, 1.0);
  const int64_t in = spec.shape.empty() ? 1 : std::max<int64_t>(spec.shape.back(), 1);
  return uniform_with_std(0.0f, 1.0 / std::sqrt(static_cast<double>(in)));
}

uint64_t tensor_key(uint64_t seed, std::string_view name) {
  return mix64(mix64(seed + kGolden) ^ fnv1a(name));
}

void fill_elements(uint64_t key, FillRule rule, DType dtype, int64_t begin, int64_t end,
                   uint8_t* out) {
  switch (dtype) {
    case DType::kBF16:
      return fill_as<bf16>(key, rule, begin, end, out, f32_to_bf16);
    case DType::kF16:
      return fill_as<fp16>(key, rule, begin, end, out, f32_to_fp16);
    case DType::kF32:
      return fill_as<float>(key, rule, begin, end, out, [](float v) { return v; });
  }
}

}  // namespace infer
