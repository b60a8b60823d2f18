// The last N token ids of a stream, the oldest overwritten first: what the repeat penalty looks
// at (model/sampling.h). Sized once at construction; push() allocates nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace infer {

class RecentIds {
 public:
  explicit RecentIds(int64_t capacity = 0) : ids_(size_t(capacity > 0 ? capacity : 0)) {}

  void push(int32_t id) {
    if (ids_.empty()) return;
    ids_[next_] = id;
    next_ = next_ + 1 == ids_.size() ? 0 : next_ + 1;
    if (count_ < ids_.size()) ++count_;
  }
  void push(std::span<const int32_t> ids) {
    // Only the last capacity() ids can survive.
    if (ids.size() > ids_.size()) ids = ids.subspan(ids.size() - ids_.size());
    for (int32_t id : ids) push(id);
  }
  void clear() { next_ = count_ = 0; }

  int64_t capacity() const { return int64_t(ids_.size()); }
  int64_t size() const { return int64_t(count_); }
  // The held ids in no particular order (the penalty counts presence, not order).
  std::span<const int32_t> ids() const { return std::span(ids_).first(count_); }

 private:
  std::vector<int32_t> ids_;
  size_t next_ = 0;   // where the next id goes
  size_t count_ = 0;  // ids held, at most capacity
};

}  // namespace infer
