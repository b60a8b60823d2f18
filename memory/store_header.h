// An episode store's header page in memory (docs/MEMORY.md, "Header page"): the slot table and
// the commit state one valid page describes, and its encoding to and from the page's bytes.
// Internal to the store (episode_store.cpp and the store_*.cpp beside it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memory/store_format.h"

namespace infer::memory {

struct Slot {
  uint64_t id = 0;  // 0: free
  int64_t recalled_ms = 0;
  float strength = 1.0f;
  uint32_t recalls = 0;
};

// The committed state a valid header page describes.
struct HeaderState {
  uint64_t seq = 0;
  uint64_t next_id = 1;
  bool codebook_set = false;
  uint32_t codebook_len = 0;
  uint32_t codebook_crc = 0;
  std::vector<Slot> slots;  // [layout.slots]
};

// page: [l.header_page_bytes], written whole (zero padding, then the CRC after the slot table).
void write_header(uint8_t* page, const format::Layout& l, const StoreGeometry& g,
                  const HeaderState& h);
// Empty when the page is not a valid header of this geometry (magic, version, slots, geometry
// or CRC off).
std::optional<HeaderState> read_header(const uint8_t* page, const format::Layout& l,
                                       const StoreGeometry& g);

// The first field in which a file's geometry differs from the one asked ("capacity 8 in the
// file, 16 asked"), or "" when they agree (the fingerprint is checked apart).
std::string geometry_difference(const StoreGeometry& file, const StoreGeometry& asked);

}  // namespace infer::memory
