// Header pages to and from bytes (store_header.h).
#include "memory/store_header.h"

#include <cstring>

namespace infer::memory {

namespace fmt = format;

void write_header(uint8_t* page, const fmt::Layout& l, const StoreGeometry& g,
                  const HeaderState& h) {
  std::memset(page, 0, l.header_page_bytes);
  std::memcpy(page + fmt::kHdrMagic, fmt::kMagic, 8);
  fmt::put<uint32_t>(page, fmt::kHdrVersion, fmt::kVersion);
  fmt::put<uint32_t>(page, fmt::kHdrSlots, l.slots);
  fmt::put_geometry(page, fmt::kHdrGeometry, g);
  fmt::put<uint64_t>(page, fmt::kHdrSeq, h.seq);
  fmt::put<uint64_t>(page, fmt::kHdrNextId, h.next_id);
  fmt::put<uint32_t>(page, fmt::kHdrCodebookSet, h.codebook_set ? 1 : 0);
  fmt::put<uint32_t>(page, fmt::kHdrCodebookLen, h.codebook_len);
  fmt::put<uint32_t>(page, fmt::kHdrCodebookCrc, h.codebook_crc);
  for (uint32_t s = 0; s < l.slots; ++s) {
    const uint64_t o = fmt::kHdrSlotTable + uint64_t(s) * fmt::kSlotBytes;
    fmt::put<uint64_t>(page, o + fmt::kSlotId, h.slots[s].id);
    fmt::put<int64_t>(page, o + fmt::kSlotRecalledMs, h.slots[s].recalled_ms);
    fmt::put<float>(page, o + fmt::kSlotStrength, h.slots[s].strength);
    fmt::put<uint32_t>(page, o + fmt::kSlotRecalls, h.slots[s].recalls);
  }
  const uint64_t crc_at = fmt::kHdrSlotTable + uint64_t(l.slots) * fmt::kSlotBytes;
  fmt::put<uint32_t>(page, crc_at, crc32(page, crc_at));
}

std::optional<HeaderState> read_header(const uint8_t* page, const fmt::Layout& l,
                                       const StoreGeometry& g) {
  if (std::memcmp(page + fmt::kHdrMagic, fmt::kMagic, 8) != 0) return std::nullopt;
  if (fmt::get<uint32_t>(page, fmt::kHdrVersion) != fmt::kVersion) return std::nullopt;
  if (fmt::get<uint32_t>(page, fmt::kHdrSlots) != l.slots) return std::nullopt;
  uint8_t geo[fmt::kGeoBytes];
  fmt::put_geometry(geo, 0, g);
  if (std::memcmp(page + fmt::kHdrGeometry, geo, fmt::kGeoBytes) != 0) return std::nullopt;
  const uint64_t crc_at = fmt::kHdrSlotTable + uint64_t(l.slots) * fmt::kSlotBytes;
  if (fmt::get<uint32_t>(page, crc_at) != crc32(page, crc_at)) return std::nullopt;
  HeaderState h;
  h.seq = fmt::get<uint64_t>(page, fmt::kHdrSeq);
  h.next_id = fmt::get<uint64_t>(page, fmt::kHdrNextId);
  h.codebook_set = fmt::get<uint32_t>(page, fmt::kHdrCodebookSet) != 0;
  h.codebook_len = fmt::get<uint32_t>(page, fmt::kHdrCodebookLen);
  h.codebook_crc = fmt::get<uint32_t>(page, fmt::kHdrCodebookCrc);
  h.slots.resize(l.slots);
  for (uint32_t s = 0; s < l.slots; ++s) {
    const uint64_t o = fmt::kHdrSlotTable + uint64_t(s) * fmt::kSlotBytes;
    h.slots[s].id = fmt::get<uint64_t>(page, o + fmt::kSlotId);
    h.slots[s].recalled_ms = fmt::get<int64_t>(page, o + fmt::kSlotRecalledMs);
    h.slots[s].strength = fmt::get<float>(page, o + fmt::kSlotStrength);
    h.slots[s].recalls = fmt::get<uint32_t>(page, o + fmt::kSlotRecalls);
  }
  return h;
}

std::string geometry_difference(const StoreGeometry& file, const StoreGeometry& asked) {
  auto field = [](const char* name, uint64_t f, uint64_t a) {
    return std::string(name) + " " + std::to_string(f) + " in the file, " + std::to_string(a) +
           " asked";
  };
  if (file.capacity != asked.capacity) return field("capacity", file.capacity, asked.capacity);
  if (file.episode_tokens != asked.episode_tokens) {
    return field("episode_tokens", file.episode_tokens, asked.episode_tokens);
  }
  if (file.key_floats != asked.key_floats) {
    return field("key_floats", file.key_floats, asked.key_floats);
  }
  if (file.payload_bytes != asked.payload_bytes) {
    return field("payload_bytes", file.payload_bytes, asked.payload_bytes);
  }
  if (file.codebook_bytes != asked.codebook_bytes) {
    return field("codebook_bytes", file.codebook_bytes, asked.codebook_bytes);
  }
  return "";
}

}  // namespace infer::memory
