// MappedFile: open + fstat + mmap(PROT_READ, MAP_PRIVATE); the descriptor is closed once mapped.
// Anonymous blocks are the same mapping without a file.
#include "model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace infer {

namespace {

std::string errno_text(int err) { return std::string(std::strerror(err)); }

}  // namespace

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return make_error(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                      path.string() + ": cannot open: " + errno_text(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return make_error(ErrorCode::kIo, path.string() + ": fstat failed: " + errno_text(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorCode::kIo, path.string() + ": not a regular file");
  }
  const size_t size = size_t(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return make_error(ErrorCode::kIo, path.string() + ": mmap of " + std::to_string(size) +
                                            " bytes failed: " + errno_text(err));
    }
    data = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file open
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

Result<std::unique_ptr<MappedFile>> MappedFile::anonymous(size_t size, const std::string& name) {
  if (size == 0) return std::unique_ptr<MappedFile>(new MappedFile(name, nullptr, 0, true));
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return make_error(ErrorCode::kIo, name + ": cannot allocate " + std::to_string(size) +
                                          " bytes: " + errno_text(errno));
  }
  ::madvise(p, size, MADV_HUGEPAGE);  // large weights stream faster through fewer TLB entries
  return std::unique_ptr<MappedFile>(
      new MappedFile(name, static_cast<const uint8_t*>(p), size, true));
}

void MappedFile::will_need(size_t offset, size_t nbytes) const {
  if (data_ == nullptr || offset >= size_) return;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t start = offset / page * page;  // madvise needs a page-aligned address
  const size_t end = std::min(size_, offset + std::min(nbytes, size_ - offset));
  ::madvise(const_cast<uint8_t*>(data_) + start, end - start, MADV_WILLNEED);
}

void MappedFile::sequential() const {
  if (data_ != nullptr) ::madvise(const_cast<uint8_t*>(data_), size_, MADV_SEQUENTIAL);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace infer
