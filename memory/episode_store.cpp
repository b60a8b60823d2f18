// The persistent episode store (docs/MEMORY.md, "File layout"): creating a file, taking its lock
// and mapping it; reading it back is store_recovery.cpp, changing it store_commits.cpp.
#include "memory/episode_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <utility>

#include "memory/file_store.h"

namespace infer::memory {
namespace {

namespace fmt = format;

// POSIX record locks (what file_lock uses) belong to the process, and closing any descriptor of
// the file drops them: a second open of the same file in one process must be refused before it
// touches the file. Entries remember their pid so that a forked child does not inherit them.
std::mutex g_open_mutex;
std::map<std::pair<dev_t, ino_t>, pid_t> g_open_files;

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
  fmt::put<uint32_t>(prefix.data(), fmt::kPrefixCrc, crc32(prefix.data(), fmt::kPrefixCrc));
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

}  // namespace

FileStore::~FileStore() {
  if (registered_) {
    std::lock_guard<std::mutex> g(g_open_mutex);
    g_open_files.erase(file_key_);
  }
}

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
