// PtyRing: a circular byte buffer indexed by absolute sequence numbers.
#include "tools_vfs/pty_ring.h"

#include <algorithm>

#include "base/check.h"

namespace infer::tools {

PtyRing::PtyRing(size_t capacity_bytes) : buf_(capacity_bytes, '\0') {
  INFER_CHECK(capacity_bytes > 0, "a PTY ring needs a capacity");
}

void PtyRing::append(std::string_view bytes) {
  const size_t cap = buf_.size();
  if (bytes.size() > cap) {  // only the last `cap` bytes can be kept
    end_ += bytes.size() - cap;
    bytes.remove_prefix(bytes.size() - cap);
  }
  size_t pos = size_t(end_ % cap);
  while (!bytes.empty()) {
    const size_t n = std::min(bytes.size(), cap - pos);
    buf_.replace(pos, n, bytes.data(), n);
    bytes.remove_prefix(n);
    end_ += n;
    pos = 0;
  }
  size_ = size_t(std::min<uint64_t>(end_, cap));
}

Result<RingRead> PtyRing::read(uint64_t from, size_t max_bytes) const {
  if (from > end_) {
    return make_error(ErrorCode::kInvalidArgument,
                      "offset " + std::to_string(from) + " is past the end of the output (" +
                          std::to_string(end_) + " bytes so far)");
  }
  RingRead r;
  r.end = end_;
  if (from < start()) {
    r.skipped = start() - from;
    from = start();
  }
  const size_t cap = buf_.size();
  size_t n = size_t(std::min<uint64_t>(end_ - from, max_bytes));
  r.from = from;
  r.bytes.reserve(n);
  size_t pos = size_t(from % cap);
  while (n > 0) {
    const size_t take = std::min(n, cap - pos);
    r.bytes.append(buf_, pos, take);
    n -= take;
    pos = 0;
  }
  r.next = r.from + r.bytes.size();
  return r;
}

}  // namespace infer::tools
