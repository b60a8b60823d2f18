// A whole file mapped read-only into memory (mmap, MAP_PRIVATE): checkpoint tensors are views
// into it, never copies, so a 24 GB checkpoint costs page cache, not heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include "base/result.h"

namespace infer {

class MappedFile {
 public:
  // Maps `path` (a regular file) read-only. An empty file maps to an empty span.
  static Result<std::unique_ptr<MappedFile>> open(const std::filesystem::path& path);
  // Zero-filled anonymous memory of `size` bytes (huge pages advised), writable through
  // writable() until the tensors in it are handed out: random-weight models generated in RAM.
  // `name` stands in for the path in messages.
  static Result<std::unique_ptr<MappedFile>> anonymous(size_t size, const std::string& name);
  uint8_t* writable() { return anonymous_ ? const_cast<uint8_t*>(data_) : nullptr; }

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

  // Hints for the kernel: read the range ahead now (load, quantise), or read it in order.
  void will_need(size_t offset, size_t nbytes) const;
  void sequential() const;

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

 private:
  MappedFile(std::filesystem::path path, const uint8_t* data, size_t size, bool anonymous = false)
      : path_(std::move(path)), data_(data), size_(size), anonymous_(anonymous) {}
  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool anonymous_ = false;
};

}  // namespace infer
