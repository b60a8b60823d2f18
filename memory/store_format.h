// The on-disk layout of an episode store (docs/MEMORY.md, "File layout"): offsets and sizes of
// the prefix, the two header pages, the codebook area and the records, all little-endian.
// Pure arithmetic and byte access; episode_store.cpp does the mapping, locking and commits.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>

#include "memory/crc32.h"
#include "memory/episode_store.h"

namespace infer::memory::format {

inline constexpr char kMagic[8] = {'I', 'N', 'F', 'E', 'R', 'M', 'E', 'M'};
inline constexpr uint32_t kVersion = 2;  // 2: keys hash token ids with the K rows (association.h)
inline constexpr uint64_t kPage = 4096;

// Prefix (offset 0, one page): what a reader needs to find everything else.
inline constexpr uint64_t kPrefixMagic = 0;      // char[8]
inline constexpr uint64_t kPrefixVersion = 8;    // u32
inline constexpr uint64_t kPrefixGeometry = 12;  // 32 bytes, see kGeo*
inline constexpr uint64_t kPrefixCrc = 44;       // u32: CRC32 of bytes [0, 44)
inline constexpr uint64_t kPrefixOwnerPid = 48;  // u32: pid of the last writer (not checksummed)

// Geometry, 32 bytes, the same in the prefix and both header pages.
inline constexpr uint64_t kGeoFingerprint = 0;  // u64
inline constexpr uint64_t kGeoCapacity = 8;     // u32
inline constexpr uint64_t kGeoTokens = 12;      // u32
inline constexpr uint64_t kGeoKeyFloats = 16;   // u32
inline constexpr uint64_t kGeoPayload = 20;     // u32
inline constexpr uint64_t kGeoCodebook = 24;    // u32
inline constexpr uint64_t kGeoBytes = 32;       // (4 bytes reserved, zero)

// Header page (two of them, alternating).
inline constexpr uint64_t kHdrMagic = 0;         // char[8]
inline constexpr uint64_t kHdrVersion = 8;       // u32
inline constexpr uint64_t kHdrSlots = 12;        // u32 = capacity + 1
inline constexpr uint64_t kHdrGeometry = 16;     // 32 bytes
inline constexpr uint64_t kHdrSeq = 48;          // u64: higher is newer
inline constexpr uint64_t kHdrNextId = 56;       // u64: the id the next append gets
inline constexpr uint64_t kHdrCodebookSet = 64;  // u32: 1 once set_codebooks committed
inline constexpr uint64_t kHdrCodebookLen = 68;  // u32
inline constexpr uint64_t kHdrCodebookCrc = 72;  // u32
inline constexpr uint64_t kHdrSlotTable = 80;    // slots x kSlotBytes, then u32 CRC32 of [0, it)
// Slot entry.
inline constexpr uint64_t kSlotId = 0;          // u64, 0 = free
inline constexpr uint64_t kSlotRecalledMs = 8;  // i64
inline constexpr uint64_t kSlotStrength = 16;   // f32
inline constexpr uint64_t kSlotRecalls = 20;    // u32
inline constexpr uint64_t kSlotBytes = 24;

// Record header.
inline constexpr uint64_t kRecId = 0;          // u64
inline constexpr uint64_t kRecPos0 = 8;        // i64
inline constexpr uint64_t kRecTokens = 16;     // u32
inline constexpr uint64_t kRecPreviewLen = 20; // u32
inline constexpr uint64_t kRecWrittenMs = 24;  // i64
inline constexpr uint64_t kRecPreview = 32;    // char[kPreviewBytes = 96]
inline constexpr uint64_t kRecIds = 128;       // i32[episode_tokens], key f32[], payload u8[], u32 CRC

// Limits that keep every size well inside 64 bits (a file claiming more is refused).
inline constexpr uint32_t kMaxCapacity = 1u << 24;
inline constexpr uint32_t kMaxTokens = 1u << 20;
inline constexpr uint32_t kMaxKeyFloats = 1u << 20;
inline constexpr uint32_t kMaxPayload = 1u << 30;
inline constexpr uint32_t kMaxCodebook = 1u << 30;

inline uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

struct Layout {
  uint32_t slots = 0;
  uint64_t header_page_bytes = 0;  // each of the two
  uint64_t header_offset[2] = {0, 0};
  uint64_t codebook_offset = 0;
  uint64_t records_offset = 0;
  uint64_t record_crc_offset = 0;  // inside a record
  uint64_t record_bytes = 0;
  uint64_t file_bytes = 0;
};

// Empty when the geometry is outside the limits above.
inline std::optional<Layout> layout_of(const StoreGeometry& g) {
  if (g.capacity == 0 || g.capacity > kMaxCapacity || g.episode_tokens > kMaxTokens ||
      g.key_floats > kMaxKeyFloats || g.payload_bytes > kMaxPayload ||
      g.codebook_bytes > kMaxCodebook) {
    return std::nullopt;
  }
  Layout l;
  l.slots = g.capacity + 1;
  l.header_page_bytes = round_up(kHdrSlotTable + uint64_t(l.slots) * kSlotBytes + 4, kPage);
  l.header_offset[0] = kPage;
  l.header_offset[1] = kPage + l.header_page_bytes;
  l.codebook_offset = kPage + 2 * l.header_page_bytes;
  l.records_offset = l.codebook_offset + round_up(g.codebook_bytes, kPage);
  l.record_crc_offset =
      kRecIds + 4 * uint64_t(g.episode_tokens) + 4 * uint64_t(g.key_floats) + g.payload_bytes;
  l.record_bytes = round_up(l.record_crc_offset + 4, 8);
  l.file_bytes = l.records_offset + uint64_t(l.slots) * l.record_bytes;
  return l;
}

// Little-endian scalar access (the build targets little-endian hosts; memcpy keeps it
// alignment-safe).
template <class T>
inline T get(const uint8_t* base, uint64_t off) {
  T v;
  std::memcpy(&v, base + off, sizeof(T));
  return v;
}
template <class T>
inline void put(uint8_t* base, uint64_t off, T v) {
  std::memcpy(base + off, &v, sizeof(T));
}

inline void put_geometry(uint8_t* base, uint64_t off, const StoreGeometry& g) {
  std::memset(base + off, 0, kGeoBytes);
  put<uint64_t>(base, off + kGeoFingerprint, g.model_fingerprint);
  put<uint32_t>(base, off + kGeoCapacity, g.capacity);
  put<uint32_t>(base, off + kGeoTokens, g.episode_tokens);
  put<uint32_t>(base, off + kGeoKeyFloats, g.key_floats);
  put<uint32_t>(base, off + kGeoPayload, g.payload_bytes);
  put<uint32_t>(base, off + kGeoCodebook, g.codebook_bytes);
}
inline StoreGeometry get_geometry(const uint8_t* base, uint64_t off) {
  StoreGeometry g;
  g.model_fingerprint = get<uint64_t>(base, off + kGeoFingerprint);
  g.capacity = get<uint32_t>(base, off + kGeoCapacity);
  g.episode_tokens = get<uint32_t>(base, off + kGeoTokens);
  g.key_floats = get<uint32_t>(base, off + kGeoKeyFloats);
  g.payload_bytes = get<uint32_t>(base, off + kGeoPayload);
  g.codebook_bytes = get<uint32_t>(base, off + kGeoCodebook);
  return g;
}

}  // namespace infer::memory::format
