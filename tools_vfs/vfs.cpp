// Vfs: list, stat, read, write, mkdir, remove (vfs_search.cpp holds the searches).
#include "tools_vfs/vfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>

#include "tools_vfs/path_rules.h"

namespace infer::tools {
namespace {

EntryType type_of(mode_t mode) {
  if (S_ISREG(mode)) return EntryType::kFile;
  if (S_ISDIR(mode)) return EntryType::kDirectory;
  if (S_ISLNK(mode)) return EntryType::kSymlink;
  return EntryType::kOther;
}

EntryInfo info_of(std::string name, const struct stat& st) {
  EntryInfo e;
  e.name = std::move(name);
  e.type = type_of(st.st_mode);
  e.size_bytes = uint64_t(st.st_size);
  e.mtime_s = int64_t(st.st_mtim.tv_sec);
  e.mode = uint32_t(st.st_mode & 07777);
  return e;
}

// A name no agent picks by accident, unique within this process; EEXIST retries the next one.
std::string temp_name() {
  static std::atomic<uint64_t> counter{0};
  return ".infer-tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

Result<void> write_all(int fd, std::string_view bytes, std::string_view path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(errno, "write", path);
    done += size_t(n);
  }
  if (::fsync(fd) != 0) return errno_error(errno, "fsync", path);
  return Ok{};
}

}  // namespace

const char* entry_type_name(EntryType type) {
  switch (type) {
    case EntryType::kFile:
      return "file";
    case EntryType::kDirectory:
      return "directory";
    case EntryType::kSymlink:
      return "symlink";
    case EntryType::kOther:
      return "other";
  }
  return "?";
}

Result<Vfs> Vfs::open(const std::string& root, ResolverKind kind, VfsLimits limits) {
  INFER_TRY(BeneathResolver resolver, BeneathResolver::open_root(root, kind));
  return Vfs(std::move(resolver), limits);
}

Result<Listing> Vfs::list(std::string_view path) const {
  INFER_TRY(UniqueFd dir, resolver_.open(path, O_RDONLY | O_DIRECTORY));
  const int dir_fd = dir.get();
  DIR* stream = ::fdopendir(dir.release());
  if (stream == nullptr) {
    const int err = errno;
    ::close(dir_fd);
    return errno_error(err, "list", path);
  }
  Listing out;
  std::vector<std::string> names;
  while (const dirent* d = ::readdir(stream)) {
    const std::string_view name = d->d_name;
    if (name == "." || name == "..") continue;
    names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());
  out.total_entries = names.size();
  for (const std::string& name : names) {
    if (out.entries.size() >= limits_.max_list_entries) break;
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone since
    EntryInfo e = info_of(name, st);
    if (e.type == EntryType::kSymlink) {
      char buf[PATH_MAX];
      const ssize_t n = ::readlinkat(dir_fd, name.c_str(), buf, sizeof(buf));
      if (n > 0) e.link_target.assign(buf, size_t(n));
    }
    out.entries.push_back(std::move(e));
  }
  ::closedir(stream);
  return out;
}

Result<EntryInfo> Vfs::stat(std::string_view path) const {
  INFER_TRY(UniqueFd fd, resolver_.open(path, O_PATH));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error(errno, "stat", path);
  return info_of(std::string(path), st);
}

Result<ReadChunk> Vfs::read(std::string_view path, uint64_t offset, size_t max_bytes) const {
  INFER_TRY(UniqueFd fd, resolver_.open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error(errno, "stat", path);
  if (!S_ISREG(st.st_mode)) {
    return make_error(ErrorCode::kInvalidArgument, "read \"" + printable_path(path) + "\": a " +
                                                       entry_type_name(type_of(st.st_mode)) +
                                                       ", not a regular file");
  }
  ReadChunk out;
  out.offset = offset;
  out.file_size_bytes = uint64_t(st.st_size);
  // Read up to the cap rather than to st_size: procfs and sysfs files report size 0.
  const size_t want = std::min(max_bytes, limits_.max_read_bytes);
  out.bytes.resize(want);
  size_t got = 0;
  bool hit_end = false;
  while (got < want) {
    const ssize_t n = ::pread(fd.get(), out.bytes.data() + got, want - got, off_t(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(errno, "read", path);
    if (n == 0) {
      hit_end = true;
      break;
    }
    got += size_t(n);
  }
  out.bytes.resize(got);
  out.eof = hit_end || (out.file_size_bytes > 0 && offset + got >= out.file_size_bytes);
  return out;
}

Result<void> Vfs::write(std::string_view path, std::string_view bytes) const {
  if (bytes.size() > limits_.max_write_bytes) {
    return make_error(ErrorCode::kInvalidArgument,
                      "write \"" + printable_path(path) + "\": " + std::to_string(bytes.size()) +
                          " bytes, over the limit of " + std::to_string(limits_.max_write_bytes));
  }
  INFER_TRY(ParentAndName target, resolver_.parent(path, /*follow_final=*/true));
  if (target.must_be_dir) return errno_error(EISDIR, "write", path);  // as open(O_CREAT) on "f/"
  const int dir = target.dir.get();
  mode_t mode = 0644;      // a new file: less the umask, as open(2) does
  bool replacing = false;  // an existing file: its exact permissions
  struct stat st {};
  if (::fstatat(dir, target.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR(st.st_mode)) return errno_error(EISDIR, "write", path);
    replacing = S_ISREG(st.st_mode);
    if (replacing) mode = st.st_mode & 07777;
  }
  std::string tmp;
  UniqueFd out;
  for (int attempt = 0; attempt < 16 && !out.valid(); ++attempt) {
    tmp = temp_name();
    out.reset(
        ::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (!out.valid() && errno != EEXIST) return errno_error(errno, "create temporary for", path);
  }
  if (!out.valid()) return errno_error(EEXIST, "create temporary for", path);
  Result<void> written = write_all(out.get(), bytes, path);
  if (written.ok() && replacing && ::fchmod(out.get(), mode) != 0) {
    written = errno_error(errno, "chmod", path);
  }
  if (written.ok() && ::renameat(dir, tmp.c_str(), dir, target.name.c_str()) != 0) {
    written = errno_error(errno, "rename into", path);
  }
  if (!written.ok()) ::unlinkat(dir, tmp.c_str(), 0);
  return written;
}

Result<void> Vfs::mkdir(std::string_view path) const {
  INFER_TRY(ParentAndName target, resolver_.parent(path, /*follow_final=*/false));
  if (::mkdirat(target.dir.get(), target.name.c_str(), 0755) != 0) {
    return errno_error(errno, "mkdir", path);
  }
  return Ok{};
}

Result<void> Vfs::remove(std::string_view path) const {
  INFER_TRY(ParentAndName target, resolver_.parent(path, /*follow_final=*/false));
  struct stat st {};
  if (::fstatat(target.dir.get(), target.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno_error(errno, "remove", path);
  }
  if (target.must_be_dir && !S_ISDIR(st.st_mode)) return errno_error(ENOTDIR, "remove", path);
  const int flag = S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0;
  if (::unlinkat(target.dir.get(), target.name.c_str(), flag) != 0) {
    return errno_error(errno, "remove", path);
  }
  return Ok{};
}

}  // namespace infer::tools
