// The persistent episode store (docs/MEMORY.md, "File layout"): one file mapped with
// Boost.Interprocess, locked with its file_lock; commits write a record into a free slot, flush,
// then the other header page with seq+1, flush.
#include "memory/episode_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <utility>

#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/sync/file_lock.hpp>

#include "memory/store_format.h"

namespace infer::memory {
namespace {

namespace bip = boost::interprocess;
namespace fmt = format;

Error io_error(const std::string& path, const std::string& what) {
  return make_error(ErrorCode::kIo, path + ": " + what);
}

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// POSIX record locks (what file_lock uses) belong to the process, and closing any descriptor of
// the file drops them: a second open of the same file in one process must be refused before it
// touches the file. Entries remember their pid so that a forked child does not inherit them.
std::mutex g_open_mutex;
std::map<std::pair<dev_t, ino_t>, pid_t> g_open_files;

struct Slot {
  uint64_t id = 0;
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
  std::vector<Slot> slots;
};

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
  fmt::put<uint32_t>(page, crc_at, fmt::crc32(page, crc_at));
}

// Empty when the page is not a valid header of this geometry.
std::optional<HeaderState> read_header(const uint8_t* page, const fmt::Layout& l,
                                       const StoreGeometry& g) {
  if (std::memcmp(page + fmt::kHdrMagic, fmt::kMagic, 8) != 0) return std::nullopt;
  if (fmt::get<uint32_t>(page, fmt::kHdrVersion) != fmt::kVersion) return std::nullopt;
  if (fmt::get<uint32_t>(page, fmt::kHdrSlots) != l.slots) return std::nullopt;
  uint8_t geo[fmt::kGeoBytes];
  fmt::put_geometry(geo, 0, g);
  if (std::memcmp(page + fmt::kHdrGeometry, geo, fmt::kGeoBytes) != 0) return std::nullopt;
  const uint64_t crc_at = fmt::kHdrSlotTable + uint64_t(l.slots) * fmt::kSlotBytes;
  if (fmt::get<uint32_t>(page, crc_at) != fmt::crc32(page, crc_at)) return std::nullopt;
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

// Writes a fresh store to a temporary file and links it into place (never a half-made file
// under `path`); EEXIST means another process made it first, which is fine.
Result<void> create_file(const std::string& path, const StoreGeometry& g, const fmt::Layout& l) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return io_error(path, std::string("cannot create: ") + std::strerror(errno));
  auto fail = [&](const char* what) -> Result<void> {
    const std::string msg = std::string(what) + ": " + std::strerror(errno);
    ::close(fd);
    ::unlink(tmp.c_str());
    return io_error(path, msg);
  };
  if (::ftruncate(fd, off_t(l.file_bytes)) != 0) return fail("cannot size the new file");
  std::vector<uint8_t> prefix(fmt::kPage, 0);
  std::memcpy(prefix.data() + fmt::kPrefixMagic, fmt::kMagic, 8);
  fmt::put<uint32_t>(prefix.data(), fmt::kPrefixVersion, fmt::kVersion);
  fmt::put_geometry(prefix.data(), fmt::kPrefixGeometry, g);
  fmt::put<uint32_t>(prefix.data(), fmt::kPrefixCrc, fmt::crc32(prefix.data(), fmt::kPrefixCrc));
  if (::pwrite(fd, prefix.data(), prefix.size(), 0) != ssize_t(prefix.size())) {
    return fail("cannot write the new file");
  }
  HeaderState h;
  h.slots.resize(l.slots);
  std::vector<uint8_t> page(l.header_page_bytes);
  for (int p = 0; p < 2; ++p) {
    h.seq = uint64_t(1 - p);  // page 0 newest; page 1 a valid older twin
    write_header(page.data(), l, g, h);
    if (::pwrite(fd, page.data(), page.size(), off_t(l.header_offset[p])) !=
        ssize_t(page.size())) {
      return fail("cannot write the new file");
    }
  }
  if (::fsync(fd) != 0) return fail("cannot sync the new file");
  ::close(fd);
  if (::link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
    const std::string msg = std::strerror(errno);
    ::unlink(tmp.c_str());
    return io_error(path, "cannot create: " + msg);
  }
  ::unlink(tmp.c_str());
  return Ok{};
}

uint32_t owner_pid_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  uint8_t b[4] = {0, 0, 0, 0};
  f.seekg(std::streamoff(fmt::kPrefixOwnerPid));
  f.read(reinterpret_cast<char*>(b), 4);
  return f ? fmt::get<uint32_t>(b, 0) : 0;
}

class FileStore final : public EpisodeStore {
 public:
  FileStore(std::string path, bool writable) : path_(std::move(path)), writable_(writable) {}
  ~FileStore() override {
    if (registered_) {
      std::lock_guard<std::mutex> g(g_open_mutex);
      g_open_files.erase(file_key_);
    }
  }

  Result<void> open_writable(const StoreGeometry& asked);
  Result<void> open_read_only();

  const StoreGeometry& geometry() const override { return geo_; }
  const std::vector<std::string>& problems() const override { return problems_; }
  std::vector<EpisodeInfo> list() const override;
  size_t size() const override { return slot_of_.size(); }
  uint64_t next_id() const override { return head_.next_id; }
  const std::string& path() const override { return path_; }
  Result<uint64_t> append(const Episode& e, uint64_t victim) override;
  Result<Episode> read(uint64_t id) const override;
  void for_each_key(
      const std::function<void(const EpisodeInfo&, std::span<const float>)>& fn) const override;
  Result<void> touch(uint64_t id, float strength, int64_t recalled_ms,
                     uint32_t recalls) override;
  Result<void> forget(uint64_t id) override;
  std::span<const uint8_t> codebooks() const override;
  Result<void> set_codebooks(std::span<const uint8_t> blob) override;

 private:
  Result<void> map(bip::mode_t mode);
  Result<void> load(const StoreGeometry* asked);
  Result<void> commit(HeaderState next);
  Result<void> check_writable() const;
  bool flush(uint64_t offset, uint64_t bytes, bool async = false);
  const uint8_t* record(uint32_t slot) const {
    return base_ + layout_.records_offset + uint64_t(slot) * layout_.record_bytes;
  }
  uint8_t* record(uint32_t slot) {
    return base_ + layout_.records_offset + uint64_t(slot) * layout_.record_bytes;
  }
  // with_preview false: scoring visits every episode each turn and needs no text.
  EpisodeInfo info_of(uint32_t slot, bool with_preview = true) const;

  std::string path_;
  bool writable_;
  std::unique_ptr<bip::file_lock> lock_;
  bip::file_mapping mapping_;  // keeps its descriptor open for the lock's lifetime
  bip::mapped_region region_;
  uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  StoreGeometry geo_;
  fmt::Layout layout_;
  HeaderState head_;
  int active_page_ = 0;
  std::map<uint64_t, uint32_t> slot_of_;  // committed id -> slot
  std::vector<std::string> problems_;
  std::pair<dev_t, ino_t> file_key_{};
  bool registered_ = false;
};

Result<void> FileStore::map(bip::mode_t mode) {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    return make_error(ErrorCode::kNotFound, path_ + ": " + std::strerror(errno));
  }
  size_ = uint64_t(st.st_size);
  if (size_ < fmt::kPage) {
    // Too short to map the prefix; still say "not ours" for a short file of something else.
    std::ifstream f(path_, std::ios::binary);
    char magic[8] = {};
    f.read(magic, 8);
    if (f && std::memcmp(magic, fmt::kMagic, 8) != 0) {
      return make_error(ErrorCode::kParse, path_ + ": not an episodic memory file");
    }
    return make_error(ErrorCode::kParse, path_ + ": truncated file (size " +
                                             std::to_string(size_) + ", expected at least " +
                                             std::to_string(fmt::kPage) + ")");
  }
  try {
    mapping_ = bip::file_mapping(path_.c_str(), mode);
    region_ = bip::mapped_region(mapping_, mode, 0, size_t(size_));
  } catch (const std::exception& e) {
    return io_error(path_, std::string("cannot map: ") + e.what());
  }
  base_ = static_cast<uint8_t*>(region_.get_address());
  return Ok{};
}

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
  if (fmt::get<uint32_t>(b, fmt::kPrefixCrc) != fmt::crc32(b, fmt::kPrefixCrc)) {
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
               fmt::crc32(r, layout_.record_crc_offset)) {
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
        fmt::crc32(cb, head_.codebook_len) != head_.codebook_crc) {
      problems_.push_back("codebooks damaged (checksum mismatch); ignored");
      head_.codebook_set = false;
      head_.codebook_len = 0;
      head_.codebook_crc = 0;
    }
  }
  return Ok{};
}

Result<void> FileStore::open_writable(const StoreGeometry& asked) {
  const auto layout = fmt::layout_of(asked);
  if (!layout) {
    return make_error(ErrorCode::kInvalidArgument, path_ + ": geometry out of range");
  }
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    if (errno != ENOENT) return io_error(path_, std::strerror(errno));
    INFER_TRY_VOID(create_file(path_, asked, *layout));
    if (::stat(path_.c_str(), &st) != 0) return io_error(path_, std::strerror(errno));
  }
  file_key_ = {st.st_dev, st.st_ino};
  {
    std::lock_guard<std::mutex> g(g_open_mutex);
    auto it = g_open_files.find(file_key_);
    if (it != g_open_files.end() && it->second == getpid()) {
      return make_error(ErrorCode::kIo, path_ + ": in use by pid " + std::to_string(getpid()) +
                                            " (this process)");
    }
    g_open_files[file_key_] = getpid();
    registered_ = true;
  }
  try {
    lock_ = std::make_unique<bip::file_lock>(path_.c_str());
    if (!lock_->try_lock()) {
      lock_.reset();
      return make_error(ErrorCode::kIo, path_ + ": in use by pid " +
                                            std::to_string(owner_pid_of(path_)));
    }
  } catch (const std::exception& e) {
    lock_.reset();
    return io_error(path_, std::string("cannot lock: ") + e.what());
  }
  // From here on no other descriptor of the file may be opened and closed (it would drop the
  // lock): everything goes through the mapping.
  INFER_TRY_VOID(map(bip::read_write));
  INFER_TRY_VOID(load(&asked));
  fmt::put<uint32_t>(base_, fmt::kPrefixOwnerPid, uint32_t(getpid()));
  flush(0, fmt::kPage, true);  // informational: no need to wait for the disk
  return Ok{};
}

Result<void> FileStore::open_read_only() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) {
    // Mapping and unmapping it here would drop this process's own write lock.
    std::lock_guard<std::mutex> g(g_open_mutex);
    auto it = g_open_files.find({st.st_dev, st.st_ino});
    if (it != g_open_files.end() && it->second == getpid()) {
      return make_error(ErrorCode::kIo, path_ + ": in use by pid " + std::to_string(getpid()) +
                                            " (this process)");
    }
  }
  INFER_TRY_VOID(map(bip::read_only));
  return load(nullptr);
}

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
  fmt::put<uint32_t>(r, layout_.record_crc_offset, fmt::crc32(r, layout_.record_crc_offset));
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
  next.codebook_crc = fmt::crc32(cb, blob.size());
  return commit(std::move(next));
}

}  // namespace

Result<std::unique_ptr<EpisodeStore>> EpisodeStore::open(const std::string& path,
                                                         const StoreGeometry& geometry) {
  auto store = std::make_unique<FileStore>(path, true);
  INFER_TRY_VOID(store->open_writable(geometry));
  return std::unique_ptr<EpisodeStore>(std::move(store));
}

Result<std::unique_ptr<EpisodeStore>> EpisodeStore::open_read_only(const std::string& path) {
  auto store = std::make_unique<FileStore>(path, false);
  INFER_TRY_VOID(store->open_read_only());
  return std::unique_ptr<EpisodeStore>(std::move(store));
}

}  // namespace infer::memory
