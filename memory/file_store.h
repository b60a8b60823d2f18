// The EpisodeStore behind EpisodeStore::open (episode_store.h): one mapped, locked file. Its
// parts live in three files: episode_store.cpp (creating, locking, mapping), store_recovery.cpp
// (reading a file back: the valid header page, the records that check out) and
// store_commits.cpp (every change: a record, then the other header page). Internal to memory/.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/sync/file_lock.hpp>

#include "memory/episode_store.h"
#include "memory/store_format.h"
#include "memory/store_header.h"

namespace infer::memory {

namespace bip = boost::interprocess;

inline Error io_error(const std::string& path, const std::string& what) {
  return make_error(ErrorCode::kIo, path + ": " + what);
}

class FileStore final : public EpisodeStore {
 public:
  FileStore(std::string path, bool writable) : path_(std::move(path)), writable_(writable) {}
  ~FileStore() override;

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
  // Checks the prefix against `asked` (null: read-only, take the file's geometry), picks the
  // valid header page and keeps the records that check out (store_recovery.cpp).
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
  format::Layout layout_;
  HeaderState head_;
  int active_page_ = 0;
  std::map<uint64_t, uint32_t> slot_of_;  // committed id -> slot
  std::vector<std::string> problems_;
  std::pair<dev_t, ino_t> file_key_{};
  bool registered_ = false;
};

}  // namespace infer::memory
