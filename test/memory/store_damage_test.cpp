// EpisodeStore damage: flipped bytes at random offsets and truncations are detected, never
// crash, and lose only what they hit (docs/MEMORY.md, "Reading a file").
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "memory/episode_store.h"
#include "memory/store_format.h"
#include "test/memory/store_fixture.h"

namespace infer::memory {
namespace {

// Flips one byte at a random offset, many times: the open never crashes; a damaged record is
// reported and skipped with every other kept; a damaged header page falls back to the other.
TEST_F(StoreTest, FlippedBytesLoseOnlyWhatTheyHit) {
  const StoreGeometry g = small_geometry();
  const auto l = *format::layout_of(g);
  {
    auto s = must_open(path(), g);
    ASSERT_TRUE(s);
    for (uint64_t id = 1; id <= 6; ++id) ASSERT_TRUE(s->append(make_episode(id, g), 0).ok());
    const std::vector<uint8_t> cb(40, 7);
    ASSERT_TRUE(s->set_codebooks(cb).ok());
    ASSERT_TRUE(s->touch(3, 4.0f, 99, 1).ok());  // the last commit: header only
  }
  const std::vector<uint8_t> pristine = read_bytes(path());
  const uint64_t seq0 = format::get<uint64_t>(pristine.data(), l.header_offset[0] + format::kHdrSeq);
  const uint64_t seq1 = format::get<uint64_t>(pristine.data(), l.header_offset[1] + format::kHdrSeq);
  const int active = seq1 > seq0 ? 1 : 0;
  const uint64_t table_end = format::kHdrSlotTable + l.slots * format::kSlotBytes + 4;
  std::map<uint32_t, uint64_t> slot_ids;  // occupied slots of the active page
  for (uint32_t sl = 0; sl < l.slots; ++sl) {
    const uint64_t id = format::get<uint64_t>(
        pristine.data(), l.header_offset[active] + format::kHdrSlotTable + sl * format::kSlotBytes);
    if (id != 0) slot_ids[sl] = id;
  }
  ASSERT_EQ(slot_ids.size(), 6u);

  std::mt19937_64 rng(29);
  int trials = 0, record_hits = 0, header_hits = 0;
  for (; trials < 800; ++trials) {
    std::vector<uint8_t> bytes = pristine;
    // A quarter each: anywhere, before the records, a header page's checked bytes, the records.
    const uint64_t off =
        trials % 4 == 0   ? rng() % bytes.size()
        : trials % 4 == 1 ? rng() % l.records_offset
        : trials % 4 == 2 ? l.header_offset[rng() % 2] + rng() % table_end
                          : l.records_offset + rng() % (bytes.size() - l.records_offset);
    bytes[off] ^= uint8_t(1 + rng() % 255);
    write_bytes(path(), bytes);
    std::optional<uint64_t> lost;  // the episode the flip should cost
    bool old_header = false, expect_problem = false, expect_error = false;
    if (off < format::kPrefixOwnerPid) {
      expect_error = true;
    } else if (off >= l.header_offset[0] && off < l.codebook_offset) {
      const int page = off >= l.header_offset[1] ? 1 : 0;
      if (off - l.header_offset[page] < table_end) {
        expect_problem = true;
        old_header = page == active;
        header_hits++;
      }
    } else if (off >= l.codebook_offset && off < l.codebook_offset + 40) {
      expect_problem = true;
    } else if (off >= l.records_offset) {
      const uint32_t sl = uint32_t((off - l.records_offset) / l.record_bytes);
      const uint64_t in = (off - l.records_offset) % l.record_bytes;
      if (slot_ids.count(sl) && in < l.record_crc_offset + 4) {
        lost = slot_ids[sl];
        expect_problem = true;
        record_hits++;
      }
    }
    auto r = EpisodeStore::open(path(), g);
    if (expect_error) {
      EXPECT_FALSE(r.ok()) << "offset " << off;
      if (!r.ok()) {
        EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
      }
      continue;
    }
    ASSERT_TRUE(r.ok()) << "offset " << off << ": " << r.error().message;
    auto& s = *r;
    EXPECT_EQ(!s->problems().empty(), expect_problem) << "offset " << off;
    for (const auto& [sl, id] : slot_ids) {
      auto e = s->read(id);
      if (lost && *lost == id) {
        EXPECT_FALSE(e.ok()) << "offset " << off;
        continue;
      }
      ASSERT_TRUE(e.ok()) << "offset " << off << " lost episode " << id;
      EXPECT_TRUE(same_content(*e, id, g)) << "offset " << off;
      if (id == 3) {
        EXPECT_EQ(e->info.strength, old_header ? 1.0f : 4.0f) << "offset " << off;
      }
    }
    EXPECT_EQ(s->size(), lost ? 5u : 6u);
    if (trials % 5 != 0) continue;
    // Still writable: the next commit drops what was skipped.
    auto id = s->append(make_episode(s->next_id(), g), 0);
    ASSERT_TRUE(id.ok()) << id.error().message;
    s.reset();
    auto again = must_open(path(), g);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->size(), lost ? 6u : 7u) << "offset " << off;
  }
  EXPECT_GT(record_hits, 80);
  EXPECT_GT(header_hits, 50);

  for (int t = 0; t < 200; ++t) {
    const size_t keep = size_t(rng() % pristine.size());
    write_bytes(path(), std::vector<uint8_t>(pristine.begin(), pristine.begin() + long(keep)));
    auto r = EpisodeStore::open(path(), g);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("truncated file (size " + std::to_string(keep)),
              std::string::npos)
        << r.error().message;
  }
}

}  // namespace
}  // namespace infer::memory
