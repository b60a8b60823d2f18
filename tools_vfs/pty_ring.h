// PtyRing: the last `capacity` bytes a PTY produced, addressed by a sequence number (the count of
// bytes ever appended before a byte), so several readers can each follow from their own offset.
// Bytes that fall off the front are counted, never silently lost: a reader asking for an offset
// already overwritten is told how many bytes it missed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace infer::tools {

struct RingRead {
  std::string bytes;
  uint64_t from = 0;     // sequence number of bytes[0]
  uint64_t next = 0;     // where the next read continues (from + bytes.size())
  uint64_t skipped = 0;  // bytes between the offset asked for and `from`, overwritten
  uint64_t end = 0;      // everything appended so far ends here
};

class PtyRing {
 public:
  explicit PtyRing(size_t capacity_bytes);

  void append(std::string_view bytes);

  // Up to max_bytes from offset FROM. An offset older than start() continues at start() (the
  // gap is `skipped`); one past end() is refused.
  Result<RingRead> read(uint64_t from, size_t max_bytes) const;

  uint64_t start() const { return end_ - size_; }  // also the count of bytes dropped so far
  uint64_t end() const { return end_; }
  size_t size() const { return size_; }
  size_t capacity() const { return buf_.size(); }

 private:
  std::string buf_;  // circular: byte with sequence s sits at s % capacity
  size_t size_ = 0;
  uint64_t end_ = 0;
};

}  // namespace infer::tools
