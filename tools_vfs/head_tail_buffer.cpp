// HeadTailBuffer: a string filled once for the head, a ring for the tail.
#include "tools_vfs/head_tail_buffer.h"

#include <algorithm>

#include "tools_vfs/utf8_cut.h"

namespace infer::tools {

HeadTailBuffer::HeadTailBuffer(size_t head_bytes, size_t tail_bytes)
    : head_capacity_(head_bytes), tail_(tail_bytes) {
  head_.reserve(head_bytes);
}

void HeadTailBuffer::append(std::string_view bytes) {
  total_bytes_ += bytes.size();
  const size_t to_head = std::min(bytes.size(), head_capacity_ - head_.size());
  head_.append(bytes.substr(0, to_head));
  bytes.remove_prefix(to_head);
  const size_t ring = tail_.size();
  if (ring == 0 || bytes.empty()) return;
  if (bytes.size() >= ring) {  // only the last RING bytes can stay
    bytes.remove_prefix(bytes.size() - ring);
    std::copy(bytes.begin(), bytes.end(), tail_.begin());
    tail_next_ = 0;
    tail_size_ = ring;
    return;
  }
  const size_t first = std::min(bytes.size(), ring - tail_next_);
  std::copy(bytes.begin(), bytes.begin() + first, tail_.begin() + tail_next_);
  std::copy(bytes.begin() + first, bytes.end(), tail_.begin());
  tail_next_ = (tail_next_ + bytes.size()) % ring;
  tail_size_ = std::min(ring, tail_size_ + bytes.size());
}

std::string HeadTailBuffer::tail() const {
  std::string out;
  out.reserve(tail_size_);
  const size_t start = (tail_next_ + tail_.size() - tail_size_) % std::max<size_t>(tail_.size(), 1);
  for (size_t i = 0; i < tail_size_; ++i) out.push_back(tail_[(start + i) % tail_.size()]);
  return out;
}

std::string HeadTailBuffer::text() const {
  const std::string tail_bytes = tail();
  if (dropped_bytes() == 0) return head_ + tail_bytes;
  // The head is followed and the tail preceded by dropped bytes: a sequence cut there is
  // dropped too, so the model sees whole characters on both sides of the marker.
  const size_t head_keep = utf8_cut_before(head_, head_.size(), true);
  const size_t tail_skip = utf8_orphan_prefix(tail_bytes);
  const uint64_t dropped = dropped_bytes() + (head_.size() - head_keep) + tail_skip;
  std::string out(head_, 0, head_keep);
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += "[... " + std::to_string(dropped) + " bytes dropped ...]\n";
  out.append(tail_bytes, tail_skip);
  return out;
}

}  // namespace infer::tools
