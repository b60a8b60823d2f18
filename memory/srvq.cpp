// SrvqCodec: training (spherical k-means, then residual k-means), greedy encoding, bit-packed
// codes and the serialized form (srvq.h).
#include "memory/srvq.h"

#include "memory/splitmix.h"
#include "memory/srvq_nearest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "base/half.h"

namespace infer::memory {
namespace {

constexpr uint32_t kMagic = 0x51565253u;  // "SRVQ" little-endian
constexpr uint32_t kVersion = 1;
constexpr size_t kGainBytes = 2;          // the gain as IEEE fp16
constexpr size_t kHeaderBytes = 4 + 4 + 4 * 5 + 8;
constexpr size_t kChecksumBytes = 8;       // FNV-1a 64 of everything before it

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}


// Eight partial sums in a fixed order: vectorizes without -ffast-math and gives the same bits
// every run (decode does not use it; encode's choices depend on it, deterministically).
inline float dot(const float* a, const float* b, int n) {
  float acc[8] = {};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  for (; i < n; ++i) acc[i & 7] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

size_t coded_row_bytes(const SrvqConfig& c) {
  const size_t bits = static_cast<size_t>(c.stages) * (c.dim / c.sub_dim) * c.code_bits;
  return kGainBytes + (bits + 7) / 8;
}
// [stages][2^code_bits][sub_dim]
size_t centroid_floats(const SrvqConfig& c) {
  return static_cast<size_t>(c.stages) * (size_t{1} << c.code_bits) * c.sub_dim;
}

Error bad(const std::string& what) { return make_error(ErrorCode::kInvalidArgument, "srvq: " + what); }

Result<void> check_config(const SrvqConfig& c) {
  if (c.dim <= 0 || c.dim > (1 << 16)) return bad("dim " + std::to_string(c.dim) + " out of range");
  if (c.sub_dim <= 0 || c.sub_dim > 256 || c.dim % c.sub_dim != 0)
    return bad("sub_dim " + std::to_string(c.sub_dim) + " is not a divisor of dim " +
               std::to_string(c.dim));
  if (c.stages < 1 || c.stages > 64) return bad("stages " + std::to_string(c.stages) + " not in 1..64");
  if (c.code_bits < 1 || c.code_bits > 8)
    return bad("code_bits " + std::to_string(c.code_bits) + " not in 1..8");
  if (c.spherical_stages < 0 || c.spherical_stages > 64)
    return bad("spherical_stages " + std::to_string(c.spherical_stages) + " not in 0..64");
  if (c.iterations < 0 || c.iterations > 1000)
    return bad("iterations " + std::to_string(c.iterations) + " not in 0..1000");
  return Result<void>();
}

// Index of the centroid nearest x: argmin |c|^2 - 2 x.c over k centroids [k, d] (norms [k]).
inline int nearest(const float* x, const float* cents, const float* norms, int k, int d) {
  int best = 0;
  float best_s = std::numeric_limits<float>::infinity();
  for (int j = 0; j < k; ++j) {
    const float s = norms[j] - 2.0f * dot(x, cents + static_cast<size_t>(j) * d, d);
    if (s < best_s) { best_s = s; best = j; }
  }
  return best;
}

// Lloyd's k-means on samples [n, d] into cents [k, d]. spherical: centroids kept on the unit
// sphere and assigned by cosine (stage 1, whose inputs are directions); the caller scales them.
void kmeans(const float* x, size_t n, int d, int k, int iterations, bool spherical,
            SplitMix64& rng, float* cents) {
  // Initial centroids: k distinct samples where there are that many (partial Fisher-Yates).
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  for (int j = 0; j < k; ++j) {
    size_t pick;
    if (static_cast<size_t>(j) < n) {
      const size_t r = j + rng.below(n - j);
      std::swap(order[j], order[r]);
      pick = order[j];
    } else {
      pick = rng.below(n);
    }
    std::memcpy(cents + static_cast<size_t>(j) * d, x + pick * d, sizeof(float) * d);
  }
  auto normalise = [&](float* c) {
    const float nn = std::sqrt(dot(c, c, d));
    if (nn > 0) for (int t = 0; t < d; ++t) c[t] /= nn;
  };
  if (spherical) for (int j = 0; j < k; ++j) normalise(cents + static_cast<size_t>(j) * d);

  std::vector<float> norms(k), sums(static_cast<size_t>(k) * d);
  std::vector<size_t> counts(k);
  std::vector<int> assign(n);
  for (int it = 0; it < iterations; ++it) {
    for (int j = 0; j < k; ++j) norms[j] = dot(cents + static_cast<size_t>(j) * d, cents + static_cast<size_t>(j) * d, d);
    for (size_t i = 0; i < n; ++i) {
      const float* xi = x + i * d;
      if (spherical) {  // argmax cosine == argmin distance to unit centroids
        int best = 0;
        float best_s = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < k; ++j) {
          const float s = dot(xi, cents + static_cast<size_t>(j) * d, d);
          if (s > best_s) { best_s = s; best = j; }
        }
        assign[i] = best;
      } else {
        assign[i] = nearest(xi, cents, norms.data(), k, d);
      }
    }
    std::fill(sums.begin(), sums.end(), 0.0f);
    std::fill(counts.begin(), counts.end(), 0);
    for (size_t i = 0; i < n; ++i) {
      float* s = sums.data() + static_cast<size_t>(assign[i]) * d;
      const float* xi = x + i * d;
      for (int t = 0; t < d; ++t) s[t] += xi[t];
      ++counts[assign[i]];
    }
    for (int j = 0; j < k; ++j) {
      float* c = cents + static_cast<size_t>(j) * d;
      if (counts[j] == 0) {  // an empty cluster restarts on a random sample
        std::memcpy(c, x + rng.below(n) * d, sizeof(float) * d);
      } else {
        const float inv = 1.0f / static_cast<float>(counts[j]);
        for (int t = 0; t < d; ++t) c[t] = sums[static_cast<size_t>(j) * d + t] * inv;
      }
      if (spherical) normalise(c);
    }
  }
}

// LSB-first bit stream of code_bits-wide codes.
inline void put_bits(uint8_t* out, size_t bit, uint32_t v, int nbits) {
  for (int b = 0; b < nbits; ++b, ++bit)
    if ((v >> b) & 1u) out[bit >> 3] |= static_cast<uint8_t>(1u << (bit & 7));
}
inline uint32_t get_bits(const uint8_t* in, size_t bit, int nbits) {
  uint32_t v = 0;
  for (int b = 0; b < nbits; ++b, ++bit) v |= static_cast<uint32_t>((in[bit >> 3] >> (bit & 7)) & 1u) << b;
  return v;
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

SrvqCodec::SrvqCodec(const SrvqConfig& cfg, std::vector<float> centroids)
    : cfg_(cfg), centroids_(std::move(centroids)) {
  const int k = 1 << cfg_.code_bits;
  norms_.resize(static_cast<size_t>(cfg_.stages) * k);
  for (size_t j = 0; j < norms_.size(); ++j) {
    const float* c = centroids_.data() + j * cfg_.sub_dim;
    norms_[j] = dot(c, c, cfg_.sub_dim);
  }
  centroids_t_.resize(centroids_.size());
  const size_t sd = cfg_.sub_dim;
  for (int s = 0; s < cfg_.stages; ++s)
    for (int j = 0; j < k; ++j)
      for (size_t t = 0; t < sd; ++t)
        centroids_t_[(static_cast<size_t>(s) * sd + t) * k + j] =
            centroids_[(static_cast<size_t>(s) * k + j) * sd + t];
}

// The first cfg.spherical_stages stages learn with spherical k-means and then get one scale
// each (the mean projection of their members on their centroid), since a sub-vector of a unit
// row is shorter than 1; the rest learn with plain k-means. Residuals are not unit and their
// length carries the error left, so plain k-means codes them directly. Measured with srvq_curve
// --spherical 0/1/8 (docs/MEMORY.md): plain, stage-1-spherical and all-spherical (normalised
// residuals, one scale per stage) stay within ~0.01-0.03 of each other in row and attention
// error, with no consistent winner; stage 1 spherical, plain residuals is the default.
Result<SrvqCodec> SrvqCodec::train(const SrvqConfig& cfg, std::span<const float> rows) {
  if (auto c = check_config(cfg); !c) return c.error();
  const size_t d = cfg.dim, sd = cfg.sub_dim;
  if (rows.empty() || rows.size() % d != 0)
    return bad("train: " + std::to_string(rows.size()) + " floats is not a whole number of rows of " +
               std::to_string(d));
  const size_t n_rows = rows.size() / d, n_sub = d / sd, n = n_rows * n_sub;
  const int k = 1 << cfg.code_bits;

  // Residual sub-vectors [n, sd], starting as the unit directions' sub-vectors.
  std::vector<float> res(rows.begin(), rows.end());
  for (size_t r = 0; r < n_rows; ++r) {
    float* x = res.data() + r * d;
    const float g = std::sqrt(dot(x, x, static_cast<int>(d)));
    if (g > 0) for (size_t t = 0; t < d; ++t) x[t] /= g;
  }
  SplitMix64 rng{cfg.seed};
  std::vector<float> cents(static_cast<size_t>(cfg.stages) * k * sd);
  std::vector<float> norms(k);
  for (int s = 0; s < cfg.stages; ++s) {
    float* cs = cents.data() + static_cast<size_t>(s) * k * sd;
    const bool spherical = s < cfg.spherical_stages;
    kmeans(res.data(), n, static_cast<int>(sd), k, cfg.iterations, spherical, rng, cs);
    if (spherical) {
      // One scale: the least-squares gain of unit centroids over their members, sum(x.c)/count.
      double proj = 0;
      for (size_t i = 0; i < n; ++i) {
        const float* xi = res.data() + i * sd;
        float best_s = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < k; ++j) best_s = std::max(best_s, dot(xi, cs + static_cast<size_t>(j) * sd, static_cast<int>(sd)));
        proj += best_s;
      }
      const float scale = static_cast<float>(proj / static_cast<double>(n));
      for (size_t t = 0; t < static_cast<size_t>(k) * sd; ++t) cs[t] *= scale;
    }
    // Subtract the greedy choice: the residual the next stage learns.
    for (int j = 0; j < k; ++j) norms[j] = dot(cs + static_cast<size_t>(j) * sd, cs + static_cast<size_t>(j) * sd, static_cast<int>(sd));
    for (size_t i = 0; i < n; ++i) {
      float* xi = res.data() + i * sd;
      const int j = nearest(xi, cs, norms.data(), k, static_cast<int>(sd));
      const float* c = cs + static_cast<size_t>(j) * sd;
      for (size_t t = 0; t < sd; ++t) xi[t] -= c[t];
    }
  }
  return SrvqCodec(cfg, std::move(cents));
}

const SrvqConfig& SrvqCodec::config() const { return cfg_; }

Result<SrvqSizes> SrvqCodec::sizes(const SrvqConfig& cfg) {
  if (auto c = check_config(cfg); !c) return c.error();
  SrvqSizes s;
  s.row_bytes = coded_row_bytes(cfg);
  s.blob_bytes = kHeaderBytes + centroid_floats(cfg) * 4 + kChecksumBytes;
  return s;
}

size_t SrvqCodec::row_bytes() const { return coded_row_bytes(cfg_); }

double SrvqCodec::bits_per_element() const {
  return static_cast<double>(row_bytes()) * 8.0 / static_cast<double>(cfg_.dim);
}

void SrvqCodec::encode(const float* row, uint8_t* out) const {
  const int d = cfg_.dim, sd = cfg_.sub_dim, k = 1 << cfg_.code_bits;
  std::memset(out, 0, row_bytes());
  float g = std::sqrt(dot(row, row, d));
  if (!std::isfinite(g)) g = 0;  // a row of inf/nan is stored as zero
  const fp16 gh = f32_to_fp16(std::min(g, 65504.0f));
  out[0] = static_cast<uint8_t>(gh & 0xff);
  out[1] = static_cast<uint8_t>(gh >> 8);
  uint8_t* codes = out + kGainBytes;
  const float inv = g > 0 ? 1.0f / g : 0.0f;
  float x[256];  // one residual sub-vector (check_config keeps sub_dim <= 256)
  const NearestCentroidFn nearest_t = fastest_nearest_centroid(k);
  size_t bit = 0;
  for (int off = 0; off < d; off += sd) {
    for (int t = 0; t < sd; ++t) x[t] = row[off + t] * inv;
    for (int s = 0; s < cfg_.stages; ++s) {
      const size_t stage = static_cast<size_t>(s) * k * sd;
      const int j = nearest_t(x, centroids_t_.data() + stage, norms_.data() + static_cast<size_t>(s) * k,
                              k, sd);
      const float* c = centroids_.data() + stage + static_cast<size_t>(j) * sd;
      for (int t = 0; t < sd; ++t) x[t] -= c[t];
      put_bits(codes, bit, static_cast<uint32_t>(j), cfg_.code_bits);
      bit += cfg_.code_bits;
    }
  }
}

void SrvqCodec::decode(const uint8_t* in, float* row) const {
  const int d = cfg_.dim, sd = cfg_.sub_dim, k = 1 << cfg_.code_bits;
  const float g = fp16_to_f32(static_cast<fp16>(in[0] | (in[1] << 8)));
  const uint8_t* codes = in + kGainBytes;
  size_t bit = 0;
  for (int off = 0; off < d; off += sd) {
    float* x = row + off;
    for (int t = 0; t < sd; ++t) x[t] = 0;
    for (int s = 0; s < cfg_.stages; ++s) {
      const uint32_t j = get_bits(codes, bit, cfg_.code_bits);
      bit += cfg_.code_bits;
      const float* c = centroids_.data() + (static_cast<size_t>(s) * k + j) * sd;
      for (int t = 0; t < sd; ++t) x[t] += c[t];
    }
  }
  // The sum of stages is a direction: back onto the unit sphere, then the gain. A plain serial
  // sum, so the same bytes give the same floats on every build.
  double nn = 0;
  for (int t = 0; t < d; ++t) nn += static_cast<double>(row[t]) * row[t];
  const float scale = nn > 0 ? static_cast<float>(g / std::sqrt(nn)) : 0.0f;
  for (int t = 0; t < d; ++t) row[t] *= scale;
}

std::vector<uint8_t> SrvqCodec::serialize() const {
  std::vector<uint8_t> out;
  out.reserve(kHeaderBytes + centroids_.size() * 4 + kChecksumBytes);
  put_u32(out, kMagic);
  put_u32(out, kVersion);
  put_u32(out, static_cast<uint32_t>(cfg_.dim));
  put_u32(out, static_cast<uint32_t>(cfg_.sub_dim));
  put_u32(out, static_cast<uint32_t>(cfg_.stages));
  put_u32(out, static_cast<uint32_t>(cfg_.code_bits));
  put_u32(out, static_cast<uint32_t>(cfg_.iterations));
  put_u64(out, cfg_.seed);
  for (float f : centroids_) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    put_u32(out, u);
  }
  put_u64(out, fnv1a(out.data(), out.size()));
  return out;
}

Result<SrvqCodec> SrvqCodec::deserialize(std::span<const uint8_t> blob) {
  if (blob.size() < kHeaderBytes)
    return make_error(ErrorCode::kParse, "srvq: blob of " + std::to_string(blob.size()) +
                                             " bytes is shorter than its header (" +
                                             std::to_string(kHeaderBytes) + ")");
  const uint8_t* p = blob.data();
  if (blob.size() < kHeaderBytes + kChecksumBytes ||
      get_u64(p + blob.size() - kChecksumBytes) != fnv1a(p, blob.size() - kChecksumBytes))
    return make_error(ErrorCode::kParse, "srvq: checksum mismatch (" + std::to_string(blob.size()) +
                                             " bytes)");
  if (get_u32(p) != kMagic) return make_error(ErrorCode::kParse, "srvq: bad magic");
  if (get_u32(p + 4) != kVersion)
    return make_error(ErrorCode::kUnsupported, "srvq: version " + std::to_string(get_u32(p + 4)));
  SrvqConfig cfg;
  // Read as u32 and range-check before the int conversion.
  uint32_t f[5];
  for (int i = 0; i < 5; ++i) f[i] = get_u32(p + 8 + 4 * i);
  for (uint32_t v : f)
    if (v > (1u << 20)) return make_error(ErrorCode::kParse, "srvq: header field " + std::to_string(v) + " out of range");
  cfg.dim = static_cast<int>(f[0]);
  cfg.sub_dim = static_cast<int>(f[1]);
  cfg.stages = static_cast<int>(f[2]);
  cfg.code_bits = static_cast<int>(f[3]);
  cfg.iterations = static_cast<int>(f[4]);
  cfg.seed = get_u64(p + 28);
  if (auto c = check_config(cfg); !c) return make_error(ErrorCode::kParse, c.error().message);
  const size_t n_floats = centroid_floats(cfg);
  const size_t want = kHeaderBytes + n_floats * 4 + kChecksumBytes;
  if (blob.size() != want)
    return make_error(ErrorCode::kParse, "srvq: blob has " + std::to_string(blob.size()) +
                                             " bytes, its header says " + std::to_string(want));
  std::vector<float> cents(n_floats);
  for (size_t i = 0; i < n_floats; ++i) {
    const uint32_t u = get_u32(p + kHeaderBytes + 4 * i);
    std::memcpy(&cents[i], &u, 4);
    if (!std::isfinite(cents[i])) return make_error(ErrorCode::kParse, "srvq: centroid " + std::to_string(i) + " is not finite");
  }
  return SrvqCodec(cfg, std::move(cents));
}

}  // namespace infer::memory
