// HeadTailBuffer: what a command wrote, kept in fixed memory however much it writes: the first
// head_bytes, the last tail_bytes, and the count of bytes dropped between them. The subshell
// feeds it each read from the child's pipe; nothing grows after construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace infer::tools {

class HeadTailBuffer {
 public:
  HeadTailBuffer() : HeadTailBuffer(0, 0) {}
  HeadTailBuffer(size_t head_bytes, size_t tail_bytes);

  void append(std::string_view bytes);

  uint64_t total_bytes() const { return total_bytes_; }
  // Bytes seen but kept in neither the head nor the tail.
  uint64_t dropped_bytes() const { return total_bytes_ - head_.size() - tail_size_; }
  const std::string& head() const { return head_; }
  std::string tail() const;  // in order, oldest first
  // Everything, when nothing was dropped; else head, a line "[... N bytes dropped ...]" and
  // tail, both edges moved to UTF-8 boundaries (the bytes moved are counted as dropped).
  std::string text() const;

 private:
  std::string head_;  // reserved at construction, filled up to head_capacity_
  size_t head_capacity_;
  std::vector<char> tail_;  // a ring of tail_.size() bytes
  size_t tail_next_ = 0;    // where the next byte goes
  size_t tail_size_ = 0;    // bytes held, up to tail_.size()
  uint64_t total_bytes_ = 0;
};

}  // namespace infer::tools
