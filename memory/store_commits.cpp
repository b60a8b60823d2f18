// Changing a store (docs/MEMORY.md, "Commit protocol"): a record (or the codebooks) is written
// and flushed first, then the header page not in use with seq + 1; a reader sees the change only
// once that page is whole. Reads of committed episodes go straight to the mapping.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "memory/file_store.h"

namespace infer::memory {
namespace {

namespace fmt = format;

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

Result<void> FileStore::check_writable() const {
  if (!writable_) return make_error(ErrorCode::kInvalidArgument, path_ + ": opened read-only");
  return Ok{};
}

// msync wants a page-aligned start (mapped_region::flush passes the address through).
bool FileStore::flush(uint64_t offset, uint64_t bytes, bool async) {
  const uint64_t page = bip::mapped_region::get_page_size();
  const uint64_t start = offset / page * page;
  return region_.flush(size_t(start), size_t(bytes + (offset - start)), async);
}

// Writes `next` (seq+1) into the page not in use, flushes it, and makes it the committed state.
Result<void> FileStore::commit(HeaderState next) {
  next.seq = head_.seq + 1;
  const int page = 1 - active_page_;
  write_header(base_ + layout_.header_offset[page], layout_, geo_, next);
  if (!flush(layout_.header_offset[page], layout_.header_page_bytes)) {
    return io_error(path_, "cannot flush a header page");
  }
  head_ = std::move(next);
  active_page_ = page;
  slot_of_.clear();
  for (uint32_t s = 0; s < layout_.slots; ++s) {
    if (head_.slots[s].id != 0) slot_of_[head_.slots[s].id] = s;
  }
  return Ok{};
}

EpisodeInfo FileStore::info_of(uint32_t slot, bool with_preview) const {
  const uint8_t* r = record(slot);
  const Slot& s = head_.slots[slot];
  EpisodeInfo info;
  info.id = s.id;
  info.pos0 = fmt::get<int64_t>(r, fmt::kRecPos0);
  info.n_tokens = fmt::get<uint32_t>(r, fmt::kRecTokens);
  info.written_ms = fmt::get<int64_t>(r, fmt::kRecWrittenMs);
  info.recalled_ms = s.recalled_ms;
  info.strength = s.strength;
  info.recalls = s.recalls;
  if (with_preview) {
    info.preview.assign(reinterpret_cast<const char*>(r + fmt::kRecPreview),
                        fmt::get<uint32_t>(r, fmt::kRecPreviewLen));
  }
  return info;
}

std::vector<EpisodeInfo> FileStore::list() const {
  std::vector<EpisodeInfo> out;
  out.reserve(slot_of_.size());
  for (const auto& [id, slot] : slot_of_) out.push_back(info_of(slot));
  return out;
}

Result<uint64_t> FileStore::append(const Episode& e, uint64_t victim) {
  INFER_TRY_VOID(check_writable());
  if (e.ids.size() > geo_.episode_tokens || e.key.size() != geo_.key_floats ||
      e.payload.size() > geo_.payload_bytes) {
    return make_error(ErrorCode::kShape,
                      path_ + ": episode of " + std::to_string(e.ids.size()) + " tokens, key " +
                          std::to_string(e.key.size()) + ", payload " +
                          std::to_string(e.payload.size()) + " does not fit the geometry");
  }
  HeaderState next = head_;
  if (slot_of_.size() >= geo_.capacity) {
    auto it = slot_of_.find(victim);
    if (victim == 0 || it == slot_of_.end()) {
      return make_error(ErrorCode::kInvalidArgument,
                        path_ + ": store full (" + std::to_string(geo_.capacity) +
                            " episodes) and victim " + std::to_string(victim) +
                            " is not one of them");
    }
    next.slots[it->second] = Slot{};
  }
  uint32_t free_slot = layout_.slots;
  for (uint32_t s = 0; s < layout_.slots; ++s) {
    if (head_.slots[s].id == 0) {
      free_slot = s;
      break;
    }
  }
  if (free_slot == layout_.slots) {
    return make_error(ErrorCode::kInternal, path_ + ": no free slot");
  }
  const uint64_t id = head_.next_id;
  uint8_t* r = record(free_slot);
  std::memset(r, 0, layout_.record_bytes);
  fmt::put<uint64_t>(r, fmt::kRecId, id);
  fmt::put<int64_t>(r, fmt::kRecPos0, e.info.pos0);
  fmt::put<uint32_t>(r, fmt::kRecTokens, uint32_t(e.ids.size()));
  size_t plen = std::min(e.info.preview.size(), kPreviewBytes);
  // Never cut a UTF-8 sequence: back off over continuation bytes.
  while (plen > 0 && plen < e.info.preview.size() &&
         (uint8_t(e.info.preview[plen]) & 0xC0) == 0x80) {
    --plen;
  }
  fmt::put<uint32_t>(r, fmt::kRecPreviewLen, uint32_t(plen));
  fmt::put<int64_t>(r, fmt::kRecWrittenMs, e.info.written_ms != 0 ? e.info.written_ms : now_ms());
  std::memcpy(r + fmt::kRecPreview, e.info.preview.data(), plen);
  uint64_t o = fmt::kRecIds;
  if (!e.ids.empty()) std::memcpy(r + o, e.ids.data(), 4 * e.ids.size());
  o += 4 * uint64_t(geo_.episode_tokens);
  if (!e.key.empty()) std::memcpy(r + o, e.key.data(), 4 * e.key.size());
  o += 4 * uint64_t(geo_.key_floats);
  if (!e.payload.empty()) std::memcpy(r + o, e.payload.data(), e.payload.size());
  fmt::put<uint32_t>(r, layout_.record_crc_offset, crc32(r, layout_.record_crc_offset));
  const uint64_t at = (layout_.records_offset + uint64_t(free_slot) * layout_.record_bytes);
  if (!flush(at, layout_.record_bytes)) {
    return io_error(path_, "cannot flush a record");
  }
  next.slots[free_slot] =
      Slot{id, e.info.recalled_ms, e.info.strength, e.info.recalls};
  next.next_id = id + 1;
  INFER_TRY_VOID(commit(std::move(next)));
  return id;
}

Result<Episode> FileStore::read(uint64_t id) const {
  auto it = slot_of_.find(id);
  if (it == slot_of_.end()) {
    return make_error(ErrorCode::kNotFound, path_ + ": no episode " + std::to_string(id));
  }
  Episode e;
  e.info = info_of(it->second);
  const uint8_t* r = record(it->second);
  e.ids.resize(e.info.n_tokens);
  uint64_t o = fmt::kRecIds;
  if (!e.ids.empty()) std::memcpy(e.ids.data(), r + o, 4 * e.ids.size());
  o += 4 * uint64_t(geo_.episode_tokens);
  e.key.resize(geo_.key_floats);
  if (!e.key.empty()) std::memcpy(e.key.data(), r + o, 4 * e.key.size());
  o += 4 * uint64_t(geo_.key_floats);
  e.payload.assign(r + o, r + o + geo_.payload_bytes);
  return e;
}

void FileStore::for_each_key(
    const std::function<void(const EpisodeInfo&, std::span<const float>)>& fn) const {
  const uint64_t key_at = fmt::kRecIds + 4 * uint64_t(geo_.episode_tokens);
  for (const auto& [id, slot] : slot_of_) {
    // Records start 8-aligned inside a page-aligned area, so the key is 4-aligned.
    const auto* key = reinterpret_cast<const float*>(record(slot) + key_at);
    fn(info_of(slot, false), std::span<const float>(key, geo_.key_floats));
  }
}

Result<void> FileStore::touch(uint64_t id, float strength, int64_t recalled_ms,
                              uint32_t recalls) {
  INFER_TRY_VOID(check_writable());
  auto it = slot_of_.find(id);
  if (it == slot_of_.end()) {
    return make_error(ErrorCode::kNotFound, path_ + ": no episode " + std::to_string(id));
  }
  HeaderState next = head_;
  Slot& s = next.slots[it->second];
  s.strength = strength;
  s.recalled_ms = recalled_ms;
  s.recalls = recalls;
  return commit(std::move(next));
}

Result<void> FileStore::forget(uint64_t id) {
  INFER_TRY_VOID(check_writable());
  auto it = slot_of_.find(id);
  if (it == slot_of_.end()) {
    return make_error(ErrorCode::kNotFound, path_ + ": no episode " + std::to_string(id));
  }
  HeaderState next = head_;
  next.slots[it->second] = Slot{};
  return commit(std::move(next));
}

std::span<const uint8_t> FileStore::codebooks() const {
  if (!head_.codebook_set) return {};
  return {base_ + layout_.codebook_offset, head_.codebook_len};
}

Result<void> FileStore::set_codebooks(std::span<const uint8_t> blob) {
  INFER_TRY_VOID(check_writable());
  if (head_.codebook_set) {
    return make_error(ErrorCode::kInvalidArgument, path_ + ": codebooks already set");
  }
  if (blob.size() > geo_.codebook_bytes) {
    return make_error(ErrorCode::kShape, path_ + ": codebooks of " + std::to_string(blob.size()) +
                                             " bytes, room for " +
                                             std::to_string(geo_.codebook_bytes));
  }
  uint8_t* cb = base_ + layout_.codebook_offset;
  if (!blob.empty()) std::memcpy(cb, blob.data(), blob.size());
  if (!blob.empty() && !flush(layout_.codebook_offset, blob.size())) {
    return io_error(path_, "cannot flush the codebooks");
  }
  HeaderState next = head_;
  next.codebook_set = true;
  next.codebook_len = uint32_t(blob.size());
  next.codebook_crc = crc32(cb, blob.size());
  return commit(std::move(next));
}

}  // namespace infer::memory
