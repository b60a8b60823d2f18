// Vfs::search_names and search_content: a depth-first walk by directory fds from the resolved
// start, opening each subdirectory and file with O_NOFOLLOW, so a search never follows a link
// (in or out of ROOT) and a link swapped in mid-search is skipped, not followed.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tools_vfs/path_rules.h"
#include "tools_vfs/vfs.h"

namespace infer::tools {
namespace {

// Up to limits.max_search_file_bytes of the regular file NAME in DIR; false when unreadable.
bool read_small_file(int dir, const std::string& name, size_t max_bytes, std::string* out) {
  UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return false;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || size_t(st.st_size) > max_bytes) {
    return false;
  }
  out->resize(size_t(st.st_size));
  size_t got = 0;
  while (got < out->size()) {
    const ssize_t n = ::pread(fd.get(), out->data() + got, out->size() - got, off_t(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += size_t(n);
  }
  out->resize(got);
  return true;
}

// A NUL in the first 8 KiB marks a binary file, as grep and git decide.
bool looks_binary(std::string_view bytes) {
  return bytes.substr(0, 8192).find('\0') != std::string_view::npos;
}

struct SearchState {
  const VfsLimits& limits;
  std::string_view needle;
  bool content;
  SearchResult result;

  bool full() const { return result.truncated; }
  void add(SearchHit hit) {
    if (result.hits.size() >= limits.max_search_hits) {
      result.truncated = true;
      return;
    }
    result.hits.push_back(std::move(hit));
  }
};

void scan_file(int dir, const std::string& name, const std::string& rel, SearchState* s) {
  std::string bytes;
  if (!read_small_file(dir, name, s->limits.max_search_file_bytes, &bytes)) return;
  if (looks_binary(bytes)) return;
  uint64_t line = 1;
  size_t line_start = 0;
  for (size_t at = bytes.find(s->needle); at != std::string::npos && !s->full();
       at = bytes.find(s->needle, at + 1)) {
    for (size_t nl = bytes.find('\n', line_start); nl != std::string::npos && nl < at;
         nl = bytes.find('\n', line_start)) {
      ++line;
      line_start = nl + 1;
    }
    size_t line_end = bytes.find('\n', at);
    if (line_end == std::string::npos) line_end = bytes.size();
    const size_t len = std::min(line_end - line_start, s->limits.max_hit_line_bytes);
    s->add(SearchHit{rel, line, bytes.substr(line_start, len)});
    at = line_end;  // one hit per line
    if (at >= bytes.size()) break;
  }
}

void walk(int dir, const std::string& rel_dir, int depth, SearchState* s) {
  UniqueFd listing_fd(::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!listing_fd.valid()) return;
  DIR* stream = ::fdopendir(listing_fd.get());
  if (stream == nullptr) return;
  listing_fd.release();
  std::vector<std::string> names;
  while (const dirent* d = ::readdir(stream)) {
    const std::string_view name = d->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());  // a stable order, so a truncated search is repeatable
  for (const std::string& name : names) {
    if (s->full()) break;
    if (++s->result.entries_visited > s->limits.max_search_files) {
      s->result.truncated = true;
      break;
    }
    const std::string rel = rel_dir.empty() ? name : rel_dir + "/" + name;
    struct stat st {};
    if (::fstatat(::dirfd(stream), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!s->content && name.find(s->needle) != std::string::npos) s->add(SearchHit{rel, 0, {}});
    if (S_ISREG(st.st_mode) && s->content) scan_file(::dirfd(stream), name, rel, s);
    if (S_ISDIR(st.st_mode)) {
      if (depth >= s->limits.max_search_depth) {
        s->result.truncated = true;
        continue;
      }
      UniqueFd sub(
          ::openat(::dirfd(stream), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub.valid()) walk(sub.get(), rel, depth + 1, s);
    }
  }
  ::closedir(stream);
}

}  // namespace

Result<SearchResult> Vfs::search_names(std::string_view path, std::string_view needle) const {
  return search(path, needle, /*content=*/false);
}

Result<SearchResult> Vfs::search_content(std::string_view path, std::string_view needle) const {
  return search(path, needle, /*content=*/true);
}

Result<SearchResult> Vfs::search(std::string_view path, std::string_view needle,
                                 bool content) const {
  if (needle.empty()) {
    return make_error(ErrorCode::kInvalidArgument, "search: the text to find is empty");
  }
  INFER_TRY(SplitPath split, split_path(path));
  INFER_TRY(UniqueFd start, resolver_.open(path, O_PATH | O_DIRECTORY));
  SearchState state{limits_, needle, content, {}};
  // Hits are named from the path as given, normalised ("a/./b/" → "a/b"); ".." stays in it.
  walk(start.get(), join_path(split.components, split.components.size()), 0, &state);
  return std::move(state.result);
}

}  // namespace infer::tools
