// Vfs: the agent's file tools on a directory ROOT (DESIGN.md §8, docs/TOOLS.md). Every path is
// relative to ROOT and resolved by BeneathResolver: it stays beneath ROOT or the call fails with
// an Error saying why. Operations act on the resolved directory fd and one final name (*at
// syscalls), never on a re-joined path string, so a link swapped in after resolution cannot
// redirect them. Results are bounded by VfsLimits.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "tools_vfs/resolver.h"

namespace infer::tools {

struct VfsLimits {
  size_t max_read_bytes = size_t(1) << 20;    // one read() at most
  size_t max_write_bytes = size_t(64) << 20;  // one write() at most
  size_t max_list_entries = 1000;             // list() keeps the first (by name) and counts all
  size_t max_search_hits = 100;
  size_t max_search_files = 10000;                 // entries visited by one search
  size_t max_search_file_bytes = size_t(1) << 20;  // larger files are not searched by content
  int max_search_depth = 32;
  size_t max_hit_line_bytes = 200;  // a content hit's line is cut to this
};

enum class EntryType { kFile, kDirectory, kSymlink, kOther };
const char* entry_type_name(EntryType type);

struct EntryInfo {
  std::string name;  // the final name (list) or the path asked for (stat)
  EntryType type = EntryType::kOther;
  uint64_t size_bytes = 0;
  int64_t mtime_s = 0;
  uint32_t mode = 0;        // permission bits
  std::string link_target;  // for kSymlink in list(): what it points to, as stored
};

struct Listing {
  std::vector<EntryInfo> entries;  // sorted by name, at most max_list_entries
  size_t total_entries = 0;        // all of them ("." and ".." not counted)
};

struct ReadChunk {
  std::string bytes;
  uint64_t offset = 0;           // where bytes start in the file
  uint64_t file_size_bytes = 0;  // size when read
  bool eof = false;              // bytes reach the end of the file
};

struct SearchHit {
  std::string path;   // relative to ROOT
  uint64_t line = 0;  // 1-based line of a content hit; 0 for a name hit
  std::string text;   // the matching line (cut), empty for a name hit
};

struct SearchResult {
  std::vector<SearchHit> hits;
  bool truncated = false;  // a limit stopped the search: there may be more
  size_t entries_visited = 0;
};

class Vfs {
 public:
  static Result<Vfs> open(const std::string& root, ResolverKind kind = ResolverKind::kAuto,
                          VfsLimits limits = {});

  ResolverKind resolver_kind() const { return resolver_.kind(); }
  const VfsLimits& limits() const { return limits_; }

  // The entries of the directory PATH ("" or "." is ROOT); links are listed, not followed.
  Result<Listing> list(std::string_view path) const;
  // PATH's type, size, mtime and mode; a final link is followed beneath ROOT.
  Result<EntryInfo> stat(std::string_view path) const;
  // Up to max_bytes (capped by max_read_bytes) of the regular file PATH from OFFSET.
  Result<ReadChunk> read(std::string_view path, uint64_t offset, size_t max_bytes) const;
  // Replaces or creates the file PATH with BYTES: written to a temporary file in the same
  // directory, synced, then renamed over PATH (readers see the old or the new file, never part).
  // A final link inside ROOT is followed (its target is replaced); one pointing out is refused.
  Result<void> write(std::string_view path, std::string_view bytes) const;
  // Creates the directory PATH (its parent must exist).
  Result<void> mkdir(std::string_view path) const;
  // Removes the file, link (not its target) or empty directory PATH.
  Result<void> remove(std::string_view path) const;
  // Entries under the directory PATH whose name holds NEEDLE; links are not followed.
  Result<SearchResult> search_names(std::string_view path, std::string_view needle) const;
  // Lines holding NEEDLE in the text files under PATH (binary and large files skipped).
  Result<SearchResult> search_content(std::string_view path, std::string_view needle) const;

 private:
  Vfs(BeneathResolver resolver, VfsLimits limits)
      : resolver_(std::move(resolver)), limits_(limits) {}
  Result<SearchResult> search(std::string_view path, std::string_view needle, bool content) const;

  BeneathResolver resolver_;
  VfsLimits limits_;
};

}  // namespace infer::tools
