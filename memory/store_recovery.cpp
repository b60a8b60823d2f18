// Reading a store back (docs/MEMORY.md, "Reading a file"): the prefix and geometry, the valid
// header page with the highest seq, and every record it names that checks out; what does not is
// skipped and reported in problems(), never a crash.
#include <cstdio>
#include <cstring>

#include "memory/file_store.h"

namespace infer::memory {

namespace fmt = format;

Result<void> FileStore::load(const StoreGeometry* asked) {
  const uint8_t* b = base_;
  if (std::memcmp(b + fmt::kPrefixMagic, fmt::kMagic, 8) != 0) {
    return make_error(ErrorCode::kParse, path_ + ": not an episodic memory file");
  }
  const uint32_t version = fmt::get<uint32_t>(b, fmt::kPrefixVersion);
  if (version != fmt::kVersion) {
    return make_error(ErrorCode::kUnsupported, path_ + ": format version " +
                                                   std::to_string(version) +
                                                   " (this build reads " +
                                                   std::to_string(fmt::kVersion) + ")");
  }
  if (fmt::get<uint32_t>(b, fmt::kPrefixCrc) != crc32(b, fmt::kPrefixCrc)) {
    return make_error(ErrorCode::kParse, path_ + ": file prefix damaged (checksum mismatch)");
  }
  geo_ = fmt::get_geometry(b, fmt::kPrefixGeometry);
  if (asked != nullptr) {
    if (geo_.model_fingerprint != asked->model_fingerprint) {
      char buf[96];
      std::snprintf(buf, sizeof buf, " (fingerprint %016llx, this model %016llx)",
                    static_cast<unsigned long long>(geo_.model_fingerprint),
                    static_cast<unsigned long long>(asked->model_fingerprint));
      return make_error(ErrorCode::kUnsupported, path_ + ": made for another model" + buf);
    }
    const std::string diff = geometry_difference(geo_, *asked);
    if (!diff.empty()) {
      return make_error(ErrorCode::kShape, path_ + ": geometry differs: " + diff);
    }
  }
  const auto layout = fmt::layout_of(geo_);
  if (!layout) {
    return make_error(ErrorCode::kParse, path_ + ": implausible geometry (capacity " +
                                             std::to_string(geo_.capacity) + ")");
  }
  layout_ = *layout;
  if (size_ < layout_.file_bytes) {
    return make_error(ErrorCode::kParse, path_ + ": truncated file (size " +
                                             std::to_string(size_) + ", expected " +
                                             std::to_string(layout_.file_bytes) + ")");
  }
  if (size_ > layout_.file_bytes) {
    return make_error(ErrorCode::kParse, path_ + ": file size " + std::to_string(size_) +
                                             ", expected " +
                                             std::to_string(layout_.file_bytes) +
                                             " for its geometry");
  }

  std::optional<HeaderState> pages[2];
  for (int p = 0; p < 2; ++p) pages[p] = read_header(b + layout_.header_offset[p], layout_, geo_);
  if (!pages[0] && !pages[1]) {
    return make_error(ErrorCode::kParse, path_ + ": both header pages damaged");
  }
  active_page_ = !pages[1] ? 0 : !pages[0] ? 1 : (pages[1]->seq > pages[0]->seq ? 1 : 0);
  if (!pages[1 - active_page_]) {
    problems_.push_back("header page " + std::to_string(1 - active_page_) +
                        " damaged; using page " + std::to_string(active_page_) + " (seq " +
                        std::to_string(pages[active_page_]->seq) + ")");
  }
  head_ = std::move(*pages[active_page_]);

  // Every named record must check out; a bad one is reported and its slot freed (in memory;
  // the next commit writes the table without it).
  uint32_t kept = 0;
  for (uint32_t s = 0; s < layout_.slots; ++s) {
    Slot& slot = head_.slots[s];
    if (slot.id == 0) continue;
    const uint8_t* r = record(s);
    std::string why;
    if (slot.id >= head_.next_id) {
      why = "id beyond next id " + std::to_string(head_.next_id);
    } else if (slot_of_.count(slot.id) != 0) {
      why = "named twice in the slot table";
    } else if (kept == geo_.capacity) {
      why = "more episodes than the capacity";
    } else if (fmt::get<uint32_t>(r, layout_.record_crc_offset) !=
               crc32(r, layout_.record_crc_offset)) {
      why = "record damaged (checksum mismatch)";
    } else if (fmt::get<uint64_t>(r, fmt::kRecId) != slot.id ||
               fmt::get<uint32_t>(r, fmt::kRecTokens) > geo_.episode_tokens ||
               fmt::get<uint32_t>(r, fmt::kRecPreviewLen) > kPreviewBytes) {
      why = "record does not match its slot";
    }
    if (!why.empty()) {
      problems_.push_back("episode " + std::to_string(slot.id) + " (slot " + std::to_string(s) +
                          "): " + why + "; skipped");
      slot = Slot{};
      continue;
    }
    slot_of_[slot.id] = s;
    ++kept;
  }
  if (head_.codebook_set) {
    const uint8_t* cb = b + layout_.codebook_offset;
    if (head_.codebook_len > geo_.codebook_bytes ||
        crc32(cb, head_.codebook_len) != head_.codebook_crc) {
      problems_.push_back("codebooks damaged (checksum mismatch); ignored");
      head_.codebook_set = false;
      head_.codebook_len = 0;
      head_.codebook_crc = 0;
    }
  }
  return Ok{};
}

}  // namespace infer::memory
