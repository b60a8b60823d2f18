// Host <-> device plumbing of the norm, embed and elementwise op tests: vectors uploaded into
// fresh device buffers, results read back, one recording run to completion. Harness failures
// (allocation, transfer) abort through Result::value(); the ops' own results go through run().
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/check.h"
#include "gpu/buffer.h"
#include "gpu/context.h"
#include "gpu/recorder.h"

namespace infer::gpu {

// A device buffer holding v after `pad_bytes` of zeros (a binding offset to test), at least 4
// bytes.
template <class T>
Buffer to_device(const VulkanContext& ctx, const std::vector<T>& v, std::string name,
                 size_t pad_bytes = 0) {
  const size_t bytes = v.size() * sizeof(T);
  Buffer b = Buffer::create(ctx, std::max<size_t>(pad_bytes + bytes, 4), BufferKind::kDevice, name)
                 .value();
  if (pad_bytes != 0) {
    const std::vector<uint8_t> zeros(pad_bytes);
    const Result<void> r = upload(ctx, b, 0, zeros.data(), pad_bytes);
    INFER_CHECK(r.ok(), "%s", r.error().message.c_str());
  }
  if (bytes != 0) {
    const Result<void> r = upload(ctx, b, pad_bytes, v.data(), bytes);
    INFER_CHECK(r.ok(), "%s", r.error().message.c_str());
  }
  return b;
}

template <class T>
std::vector<T> from_device(const VulkanContext& ctx, const Buffer& b, size_t count,
                           VkDeviceSize offset = 0) {
  std::vector<T> v(count);
  const Result<void> r = download(ctx, b, offset, v.data(), count * sizeof(T));
  INFER_CHECK(r.ok(), "%s", r.error().message.c_str());
  return v;
}

// Records what `record` records, submits it and waits.
inline Result<void> run_recording(const VulkanContext& ctx,
                                  const std::function<Result<void>(Recorder&)>& record) {
  INFER_TRY(std::unique_ptr<Recorder> rec, Recorder::create(ctx));
  INFER_TRY_VOID(rec->begin());
  INFER_TRY_VOID(record(*rec));
  return rec->submit_and_wait();
}

}  // namespace infer::gpu
