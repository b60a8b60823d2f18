// Bounded spherical residual vector quantization of KV rows (DESIGN.md §5). A row (one head's
// K or V, `dim` floats) is stored as its norm (the gain) and its unit direction; the direction is
// cut into sub-vectors of `sub_dim` and each sub-vector is coded by `stages` residual codebooks
// of 2^code_bits centroids, each stage coding what the ones before left. Plain k-means shrinks
// centroids towards the origin and loses direction; learning on the unit sphere does not.
// Codebooks are learned from rows the conversation produced (spherical k-means, deterministic
// given the seed), serialized into the episode store and versioned with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"

namespace infer::memory {

struct SrvqConfig {
  int dim = 256;       // row length (a head's dimension)
  int sub_dim = 32;    // divides dim; at most 256
  int stages = 8;      // residual codebooks
  int code_bits = 7;   // 2^code_bits centroids per codebook, 1..8
  uint64_t seed = 1;   // k-means initialisation
  int iterations = 12;
  // Leading stages learned with spherical k-means (unit centroids and one scale per stage);
  // the rest with plain k-means. Training only: the blob stores the centroids, not this.
  int spherical_stages = 1;
};

// What a codec of one configuration takes, known before any codec is learned (how a store is
// sized): one coded row (gain and codes, bit-packed), and serialize()'s blob.
struct SrvqSizes {
  size_t row_bytes = 0;
  size_t blob_bytes = 0;
};

class SrvqCodec {
 public:
  // cfg's sizes; an invalid cfg is refused as train() refuses it.
  static Result<SrvqSizes> sizes(const SrvqConfig& cfg);
  // Learns the codebooks from rows [n, cfg.dim]; deterministic given cfg.seed and the rows.
  static Result<SrvqCodec> train(const SrvqConfig& cfg, std::span<const float> rows);
  const SrvqConfig& config() const;

  // Bytes one coded row takes (gain and codes, bit-packed), and the bits per element that gives.
  size_t row_bytes() const;
  double bits_per_element() const;

  // out [row_bytes()]; in [dim]. encode allocates nothing.
  void encode(const float* row, uint8_t* out) const;
  // row [dim]; the same bytes always give the same floats, bit for bit.
  void decode(const uint8_t* in, float* row) const;

  // A self-describing blob (config, centroids) and its inverse (which checks sizes).
  std::vector<uint8_t> serialize() const;
  static Result<SrvqCodec> deserialize(std::span<const uint8_t> blob);

 private:
  SrvqCodec(const SrvqConfig& cfg, std::vector<float> centroids);
  SrvqConfig cfg_;
  std::vector<float> centroids_;  // [stages][2^code_bits][sub_dim]
  std::vector<float> centroids_t_;  // [stages][sub_dim][2^code_bits]: encode's layout
  std::vector<float> norms_;      // [stages][2^code_bits]: |c|^2
};

}  // namespace infer::memory
