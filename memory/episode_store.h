// The persistent episode store (DESIGN.md §5, docs/MEMORY.md): one file mapped with
// Boost.Interprocess, locked by its process, holding fixed-size checksummed episode records and
// two alternating header pages. A commit writes a record into a free slot, then the other
// header page with a higher sequence number; a reopen takes the valid header with the highest
// sequence, so it sees exactly the committed episodes. Codec- and model-agnostic: an episode's
// coded rows and its association key are opaque here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace infer::memory {

// What every record of a file looks like; fixed when the file is created, checked on reopen.
struct StoreGeometry {
  uint64_t model_fingerprint = 0;  // config and tensor shapes (another model: refused)
  uint32_t capacity = 64;          // episodes
  uint32_t episode_tokens = 64;    // the most tokens an episode holds
  uint32_t key_floats = 0;         // association key length
  uint32_t payload_bytes = 0;      // coded rows of a full episode
  uint32_t codebook_bytes = 0;     // room for the serialized codecs
};

// An episode's mutable and descriptive fields (what --mem-list and QUERY show).
struct EpisodeInfo {
  uint64_t id = 0;           // unique in the file, increasing
  int64_t pos0 = 0;          // logical position of its first token
  uint32_t n_tokens = 0;
  int64_t written_ms = 0;    // unix epoch milliseconds
  int64_t recalled_ms = 0;   // 0: never
  float strength = 1.0f;     // grows on recall, decays with time (the caller's rule)
  uint32_t recalls = 0;
  std::string preview;       // UTF-8 text, at most kPreviewBytes
};
inline constexpr size_t kPreviewBytes = 96;

struct Episode {
  EpisodeInfo info;
  std::vector<int32_t> ids;      // [n_tokens]
  std::vector<float> key;        // [key_floats]
  std::vector<uint8_t> payload;  // [payload_bytes]
};

class EpisodeStore {
 public:
  virtual ~EpisodeStore() = default;
  // Creates the file with `geometry`, or opens it and checks magic, version, geometry and
  // fingerprint (each mismatch a clear one-line error). Takes the file's lock: a second process
  // gets "in use by pid N". Damaged records are skipped and listed in problems().
  static Result<std::unique_ptr<EpisodeStore>> open(const std::string& path,
                                                    const StoreGeometry& geometry);
  // Opens without a model (--mem-list): geometry from the file, nothing written.
  static Result<std::unique_ptr<EpisodeStore>> open_read_only(const std::string& path);

  virtual const StoreGeometry& geometry() const = 0;
  virtual const std::vector<std::string>& problems() const = 0;
  // Committed episodes, by id.
  virtual std::vector<EpisodeInfo> list() const = 0;
  virtual size_t size() const = 0;
  // The id the next append will assign (ids are never reused once committed).
  virtual uint64_t next_id() const = 0;
  virtual const std::string& path() const = 0;

  // Commits a new episode (info.id is assigned and returned). ids: at most episode_tokens
  // (n_tokens is ids.size()); key: exactly key_floats; payload: at most payload_bytes (read()
  // returns payload_bytes, zero-padded); preview cut to kPreviewBytes; written_ms 0: now. When full, the episode `victim`
  // names is replaced in the same commit (the caller picks the weakest); victim 0 when full:
  // error.
  virtual Result<uint64_t> append(const Episode& e, uint64_t victim) = 0;
  virtual Result<Episode> read(uint64_t id) const = 0;
  // Key of every committed episode without copying payloads: fn(info, key); info.preview is
  // left empty (scoring needs no text).
  virtual void for_each_key(
      const std::function<void(const EpisodeInfo&, std::span<const float>)>& fn) const = 0;
  // Updates strength / recall time / count (one commit).
  virtual Result<void> touch(uint64_t id, float strength, int64_t recalled_ms,
                             uint32_t recalls) = 0;
  virtual Result<void> forget(uint64_t id) = 0;

  // The serialized codecs (empty until set); set once, committed like an episode.
  virtual std::span<const uint8_t> codebooks() const = 0;
  virtual Result<void> set_codebooks(std::span<const uint8_t> blob) = 0;
};

}  // namespace infer::memory
