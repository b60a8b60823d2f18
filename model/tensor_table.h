// The one table of checkpoint tensors (names, shapes, kinds) a config implies (GEMMA4_TEXT.md §7):
// loading, quantising, mkmodel and tests all iterate expected_tensors() rather than spelling names.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/config.h"

namespace infer {

class TensorStore;

enum class TensorKind {
  kMatrix,     // a projection [out, in]: quantizable
  kEmbedding,  // a token table [rows, width], read a row at a time
  kNorm,       // an RMSNorm weight [n], multiplied as stored (§4.1)
  kScalar,     // layer_scalar [1]
  kExperts,    // stacked expert matrices [E, out, in]
  kVector,     // other vectors: router scales, attention biases
};
const char* tensor_kind_name(TensorKind k);

struct TensorSpec {
  std::string name;  // canonical: no "model.language_model." / "model." prefix
  std::vector<int64_t> shape;
  TensorKind kind = TensorKind::kMatrix;
  int layer = -1;  // -1: global
};

// Every tensor the text decoder reads, globals first, then layer by layer. Not listed (and
// tolerated if present): lm_head.weight (tied, §2) and KV-shared layers' k_proj/v_proj/k_norm.
std::vector<TensorSpec> expected_tensors(const ModelConfig& cfg);

// Every expected tensor is in `store` with its shape and a BF16/F16/F32 dtype; an lm_head.weight,
// if present, is [V, H]. Errors name the tensor and both shapes.
Result<void> validate_tensors(const ModelConfig& cfg, const TensorStore& store);

// "[262144, 1536]"
std::string shape_string(std::span<const int64_t> shape);

}  // namespace infer
