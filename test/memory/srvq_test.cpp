// SrvqCodec (memory/srvq.h): deterministic training, error falling with stages, direction and
// gain kept, bit-identical decode after a serialize round trip, bad blobs refused.
#include "memory/srvq.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "test/memory/kv_rows.h"

namespace infer::memory {
namespace {

using test::structured_rows;

double norm(const float* x, int d) {
  double s = 0;
  for (int t = 0; t < d; ++t) s += double(x[t]) * x[t];
  return std::sqrt(s);
}

// Mean relative L2 error of decode(encode(row)) over rows [n, dim].
double mean_rel_error(const SrvqCodec& c, const std::vector<float>& rows) {
  const int d = c.config().dim;
  const size_t n = rows.size() / d;
  std::vector<uint8_t> code(c.row_bytes());
  std::vector<float> out(d);
  double sum = 0;
  for (size_t r = 0; r < n; ++r) {
    const float* x = &rows[r * d];
    c.encode(x, code.data());
    c.decode(code.data(), out.data());
    double e = 0;
    for (int t = 0; t < d; ++t) e += (double(out[t]) - x[t]) * (double(out[t]) - x[t]);
    sum += std::sqrt(e) / norm(x, d);
  }
  return sum / double(n);
}

SrvqConfig small_config(int stages) {
  SrvqConfig c;
  c.dim = 64;
  c.sub_dim = 16;
  c.stages = stages;
  c.code_bits = 5;
  c.iterations = 8;
  c.seed = 7;
  return c;
}

TEST(Srvq, TrainingIsDeterministicGivenTheSeed) {
  const auto rows = structured_rows(600, 64, 1);
  auto a = SrvqCodec::train(small_config(3), rows);
  auto b = SrvqCodec::train(small_config(3), rows);
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->serialize(), b->serialize());
  SrvqConfig other = small_config(3);
  other.seed = 8;
  auto c = SrvqCodec::train(other, rows);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->serialize(), c->serialize());  // the seed matters
}

TEST(Srvq, ErrorFallsAsStagesIncrease) {
  const auto train = structured_rows(1000, 64, 2), held = structured_rows(200, 64, 3);
  double prev = 1e9;
  for (int stages : {1, 2, 4, 8}) {
    auto c = SrvqCodec::train(small_config(stages), train);
    ASSERT_TRUE(c.ok());
    const double e = mean_rel_error(*c, held);
    EXPECT_LT(e, prev) << stages << " stages";
    prev = e;
  }
  EXPECT_LT(prev, 0.2);  // 8 stages of 5 bits on 16-wide sub-vectors: 2.5 bits an element
}

TEST(Srvq, DirectionAndGainArePreserved) {
  const auto train = structured_rows(1000, 64, 4), held = structured_rows(200, 64, 5);
  auto c = SrvqCodec::train(small_config(6), train);
  ASSERT_TRUE(c.ok());
  std::vector<uint8_t> code(c->row_bytes());
  std::vector<float> out(64);
  double cos_sum = 0;
  for (size_t r = 0; r < 200; ++r) {
    const float* x = &held[r * 64];
    c->encode(x, code.data());
    c->decode(code.data(), out.data());
    const double nx = norm(x, 64), no = norm(out.data(), 64);
    double dotp = 0;
    for (int t = 0; t < 64; ++t) dotp += double(x[t]) * out[t];
    EXPECT_GT(dotp / (nx * no), 0.92) << "row " << r;
    cos_sum += dotp / (nx * no);
    EXPECT_NEAR(no / nx, 1.0, 1e-3) << "row " << r;  // fp16 gain: 2^-11 relative
  }
  EXPECT_GT(cos_sum / 200, 0.95);
}

TEST(Srvq, ZeroRowDecodesToZero) {
  auto c = SrvqCodec::train(small_config(2), structured_rows(300, 64, 6));
  ASSERT_TRUE(c.ok());
  std::vector<float> zero(64, 0.0f), out(64, 1.0f);
  std::vector<uint8_t> code(c->row_bytes());
  c->encode(zero.data(), code.data());
  c->decode(code.data(), out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

TEST(Srvq, SerializeRoundTripDecodesBitIdentically) {
  const auto held = structured_rows(100, 64, 8);
  auto c = SrvqCodec::train(small_config(4), structured_rows(500, 64, 7));
  ASSERT_TRUE(c.ok());
  const auto blob = c->serialize();
  auto d = SrvqCodec::deserialize(blob);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->serialize(), blob);
  EXPECT_EQ(d->row_bytes(), c->row_bytes());
  std::vector<uint8_t> code_c(c->row_bytes()), code_d(d->row_bytes());
  std::vector<float> out_c(64), out_d(64);
  for (size_t r = 0; r < 100; ++r) {
    c->encode(&held[r * 64], code_c.data());
    d->encode(&held[r * 64], code_d.data());
    ASSERT_EQ(code_c, code_d) << "row " << r;
    c->decode(code_c.data(), out_c.data());
    d->decode(code_c.data(), out_d.data());
    ASSERT_EQ(std::memcmp(out_c.data(), out_d.data(), 64 * sizeof(float)), 0) << "row " << r;
  }
}

TEST(Srvq, BadBlobsAreRefused) {
  auto c = SrvqCodec::train(small_config(2), structured_rows(300, 64, 9));
  ASSERT_TRUE(c.ok());
  const auto blob = c->serialize();
  // Every truncation, and one byte too many.
  for (size_t n = 0; n < blob.size(); n += (n < 64 ? 1 : 97)) {
    EXPECT_FALSE(SrvqCodec::deserialize(std::span(blob.data(), n)).ok()) << n << " bytes";
  }
  auto longer = blob;
  longer.push_back(0);
  EXPECT_FALSE(SrvqCodec::deserialize(longer).ok());
  // Any byte flipped (header, centroids or checksum): the checksum refuses it.
  for (size_t i = 0; i < blob.size(); i += (i < 64 ? 1 : 61)) {
    auto bad = blob;
    bad[i] ^= 0x5a;
    EXPECT_FALSE(SrvqCodec::deserialize(bad).ok()) << "byte " << i;
  }
  auto last = blob;
  last.back() ^= 1;
  EXPECT_FALSE(SrvqCodec::deserialize(last).ok());
}

TEST(Srvq, BadConfigsAndRowsAreRefused) {
  const auto rows = structured_rows(100, 64, 10);
  SrvqConfig c = small_config(2);
  c.sub_dim = 24;  // does not divide 64
  EXPECT_FALSE(SrvqCodec::train(c, rows).ok());
  c = small_config(2);
  c.code_bits = 9;
  EXPECT_FALSE(SrvqCodec::train(c, rows).ok());
  c = small_config(2);
  EXPECT_FALSE(SrvqCodec::train(c, std::span(rows.data(), 63)).ok());
  EXPECT_FALSE(SrvqCodec::train(c, std::span<const float>()).ok());
}

TEST(Srvq, BitsPerElementIsRowBytesOverDim) {
  for (int sub : {16, 32, 64})
    for (int bits : {4, 7, 8})
      for (int stages : {1, 8}) {
        SrvqConfig c;
        c.dim = 256;
        c.sub_dim = sub;
        c.code_bits = bits;
        c.stages = stages;
        c.iterations = 1;
        auto k = SrvqCodec::train(c, structured_rows(64, 256, 11));
        ASSERT_TRUE(k.ok());
        EXPECT_DOUBLE_EQ(k->bits_per_element(), double(k->row_bytes()) * 8.0 / 256.0);
        EXPECT_EQ(k->row_bytes(), 2 + (size_t(stages) * (256 / sub) * bits + 7) / 8);
      }
  SrvqConfig d;  // the default: 8 stages x 7 bits on 32-wide sub-vectors + fp16 gain
  auto k = SrvqCodec::train(d, structured_rows(300, 256, 12));
  ASSERT_TRUE(k.ok());
  EXPECT_LE(k->bits_per_element(), 2.0);
}

// A store is sized before any codec is learned: sizes() must say what a learned codec takes.
TEST(Srvq, SizesFollowFromTheConfigAlone) {
  for (int dim : {64, 512})
    for (int sub : {16, 32})
      for (int bits : {3, 7, 8})
        for (int stages : {1, 8}) {
          SrvqConfig c;
          c.dim = dim;
          c.sub_dim = sub;
          c.code_bits = bits;
          c.stages = stages;
          c.iterations = 1;
          auto sizes = SrvqCodec::sizes(c);
          ASSERT_TRUE(sizes.ok()) << sizes.error().message;
          auto k = SrvqCodec::train(c, structured_rows(40, dim, 13));
          ASSERT_TRUE(k.ok());
          EXPECT_EQ(sizes->row_bytes, k->row_bytes()) << dim << "/" << sub << "/" << bits;
          EXPECT_EQ(sizes->blob_bytes, k->serialize().size()) << dim << "/" << sub << "/" << bits;
        }
  SrvqConfig bad;
  bad.dim = 48;  // sub_dim 32 does not divide it
  ASSERT_FALSE(SrvqCodec::sizes(bad).ok());
  EXPECT_NE(SrvqCodec::sizes(bad).error().message.find("sub_dim 32"), std::string::npos);
}

}  // namespace
}  // namespace infer::memory
