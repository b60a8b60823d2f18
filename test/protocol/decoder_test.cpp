// FrameDecoder on a byte stream cut anywhere: one byte at a time, random splits, oversized
// frames skipped without being stored, and input that ends mid-frame.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "protocol/encode.h"
#include "protocol/frame.h"
#include "protocol/parse.h"
#include "test/protocol/samples.h"

namespace infer::protocol {
namespace {

struct Seen {
  std::vector<FrameHeader> headers;
  std::vector<std::vector<uint8_t>> payloads;
  std::vector<FrameHeader> too_large;
};

// Feeds `chunk` and drains every event it completes.
void feed(FrameDecoder& dec, std::span<const uint8_t> chunk, Seen& seen) {
  while (auto ev = dec.next(chunk)) {
    if (auto* f = std::get_if<Frame>(&*ev)) {
      seen.headers.push_back(f->header);
      seen.payloads.emplace_back(f->payload.begin(), f->payload.end());
    } else {
      seen.too_large.push_back(std::get<FrameTooLarge>(*ev).header);
    }
  }
  EXPECT_TRUE(chunk.empty());
}

std::vector<uint8_t> all_client_frames() {
  std::vector<uint8_t> bytes;
  for (const auto& [m, rid] : test::client_samples()) encode(m, rid, bytes);
  return bytes;
}

void expect_all_client_frames(const Seen& seen) {
  const auto samples = test::client_samples();
  ASSERT_EQ(seen.headers.size(), samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(seen.headers[i].request_id, samples[i].second) << "frame " << i;
    auto parsed = parse_client_payload(seen.headers[i].opcode, seen.payloads[i]);
    ASSERT_TRUE(parsed.ok()) << "frame " << i << ": " << parsed.error().message;
    EXPECT_TRUE(*parsed == samples[i].first) << "frame " << i;
  }
}

TEST(ProtocolDecoder, ManyFramesInOneChunk) {
  const auto bytes = all_client_frames();
  FrameDecoder dec;
  Seen seen;
  feed(dec, bytes, seen);
  expect_all_client_frames(seen);
  EXPECT_TRUE(dec.at_boundary());
  // Whole frames inside one chunk are handed out in place: nothing buffered.
  EXPECT_EQ(dec.buffer_capacity(), 0u);
}

TEST(ProtocolDecoder, OneByteAtATime) {
  const auto bytes = all_client_frames();
  FrameDecoder dec;
  Seen seen;
  for (size_t i = 0; i < bytes.size(); ++i) {
    feed(dec, std::span<const uint8_t>(&bytes[i], 1), seen);
  }
  expect_all_client_frames(seen);
  EXPECT_TRUE(dec.at_boundary());
}

TEST(ProtocolDecoder, RandomSplits) {
  const auto bytes = all_client_frames();
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    FrameDecoder dec;
    Seen seen;
    size_t at = 0;
    while (at < bytes.size()) {
      const size_t n = std::min<size_t>(bytes.size() - at, rng() % 40);
      feed(dec, std::span<const uint8_t>(bytes.data() + at, n), seen);
      at += n;
    }
    expect_all_client_frames(seen);
    ASSERT_TRUE(dec.at_boundary()) << "trial " << trial;
  }
}

TEST(ProtocolDecoder, OversizedFrameIsReportedSkippedAndNotStored) {
  FrameDecoder dec(64);
  std::vector<uint8_t> bytes;
  // A header announcing 1000 bytes (limit 64), then those 1000 bytes, then a good frame.
  put_header(bytes, FrameHeader{1000, 0x0002, 0, 77});
  bytes.insert(bytes.end(), 1000, 0xAB);
  encode(ClientMessage{TraceMark{"after"}}, 78, bytes);
  for (size_t split : {size_t{1}, size_t{7}, size_t{13}, bytes.size()}) {
    FrameDecoder d(64);
    Seen seen;
    for (size_t at = 0; at < bytes.size(); at += split) {
      feed(d, std::span<const uint8_t>(bytes.data() + at, std::min(split, bytes.size() - at)),
           seen);
    }
    ASSERT_EQ(seen.too_large.size(), 1u) << "split " << split;
    EXPECT_EQ(seen.too_large[0].request_id, 77u);
    EXPECT_EQ(seen.too_large[0].payload_bytes, 1000u);
    ASSERT_EQ(seen.headers.size(), 1u) << "split " << split;
    EXPECT_EQ(seen.headers[0].request_id, 78u);
    EXPECT_LE(d.buffer_capacity(), 64u);
    EXPECT_TRUE(d.at_boundary());
  }
}

TEST(ProtocolDecoder, HugeLengthNeverAllocates) {
  // 4 GiB - 1 announced: the decoder must neither allocate it nor wait for more than it says.
  FrameDecoder dec;
  std::vector<uint8_t> bytes;
  put_header(bytes, FrameHeader{0xFFFFFFFFu, 0x0001, 0, 5});
  Seen seen;
  feed(dec, bytes, seen);
  ASSERT_EQ(seen.too_large.size(), 1u);
  EXPECT_EQ(dec.buffer_capacity(), 0u);
  EXPECT_FALSE(dec.at_boundary());
  EXPECT_EQ(dec.partial_frame_bytes(), kHeaderBytes + 0xFFFFFFFFull);
}

TEST(ProtocolDecoder, LimitIsInclusive) {
  FrameDecoder dec(8);
  std::vector<uint8_t> bytes;
  put_header(bytes, FrameHeader{8, 0x0002, 0, 1});
  bytes.insert(bytes.end(), 8, 'x');
  put_header(bytes, FrameHeader{9, 0x0002, 0, 2});
  bytes.insert(bytes.end(), 9, 'x');
  Seen seen;
  feed(dec, bytes, seen);
  EXPECT_EQ(seen.headers.size(), 1u);
  EXPECT_EQ(seen.too_large.size(), 1u);
}

TEST(ProtocolDecoder, InputEndingMidFrameIsVisible) {
  std::vector<uint8_t> bytes;
  encode(ClientMessage{AppendText{"hello"}}, 1, bytes);
  FrameDecoder dec;
  Seen seen;
  feed(dec, std::span<const uint8_t>(bytes.data(), 5), seen);  // inside the header
  EXPECT_FALSE(dec.at_boundary());
  EXPECT_EQ(dec.partial_bytes(), 5u);
  feed(dec, std::span<const uint8_t>(bytes.data() + 5, 9), seen);  // inside the payload
  EXPECT_FALSE(dec.at_boundary());
  EXPECT_EQ(dec.partial_bytes(), 14u);
  EXPECT_EQ(dec.partial_frame_bytes(), bytes.size());
  feed(dec, std::span<const uint8_t>(bytes.data() + 14, bytes.size() - 14), seen);
  EXPECT_TRUE(dec.at_boundary());
  EXPECT_EQ(seen.headers.size(), 1u);
}

}  // namespace
}  // namespace infer::protocol
