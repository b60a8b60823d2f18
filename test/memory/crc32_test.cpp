// crc32 (memory/crc32.h) against boost's byte-wise crc_32_type, the checksum every store written
// so far carries: equal on random buffers of every length up to a few slices past the word loop,
// at every alignment, and on long ones, so the file format is unchanged.
#include "memory/crc32.h"

#include <cstring>
#include <random>
#include <vector>

#include <boost/crc.hpp>
#include <gtest/gtest.h>

namespace infer::memory {
namespace {

uint32_t boost_crc32(const uint8_t* p, size_t n) {
  boost::crc_32_type c;
  c.process_bytes(p, n);
  return c.checksum();
}

TEST(Crc32, CheckValueOfTheStandard) {
  const char* s = "123456789";
  EXPECT_EQ(crc32(reinterpret_cast<const uint8_t*>(s), 9), 0xCBF43926u);
  EXPECT_EQ(crc32(nullptr, 0), 0u);
}

TEST(Crc32, EqualsBoostAtEveryLengthAndAlignment) {
  std::mt19937_64 rng(29);
  std::vector<uint8_t> buf(4096 + 64);
  for (uint8_t& b : buf) b = uint8_t(rng());
  for (size_t align = 0; align < 16; ++align) {
    for (size_t n = 0; n <= 100; ++n) {
      const uint8_t* p = buf.data() + align;
      ASSERT_EQ(crc32(p, n), boost_crc32(p, n)) << n << " bytes at offset " << align;
    }
    for (size_t n : {127, 128, 129, 1000, 4093, 4096}) {
      const uint8_t* p = buf.data() + align;
      ASSERT_EQ(crc32(p, n), boost_crc32(p, n)) << n << " bytes at offset " << align;
    }
  }
}

TEST(Crc32, EqualsBoostOnLongBuffersAndSeesEveryBit) {
  std::mt19937_64 rng(7);
  std::vector<uint8_t> buf(1 << 20);
  for (uint8_t& b : buf) b = uint8_t(rng());
  for (int trial = 0; trial < 8; ++trial) {
    const size_t at = rng() % 61, n = buf.size() - 64 - rng() % 4096;
    ASSERT_EQ(crc32(buf.data() + at, n), boost_crc32(buf.data() + at, n)) << n << " bytes";
  }
  // Any one flipped bit changes it (a CRC detects every single-bit error).
  const uint32_t clean = crc32(buf.data(), 4096);
  for (size_t bit = 0; bit < 4096 * 8; bit += 97) {
    buf[bit / 8] ^= uint8_t(1u << (bit % 8));
    EXPECT_NE(crc32(buf.data(), 4096), clean) << "bit " << bit;
    buf[bit / 8] ^= uint8_t(1u << (bit % 8));
  }
}

}  // namespace
}  // namespace infer::memory
