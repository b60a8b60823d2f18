// Recorder: one command buffer of dispatches and copies, submitted and waited on with a fence.
// Dispatch is the one way ops record work; it inserts a barrier only where data depends (a
// buffer written earlier in the recording and read or written now, or read earlier and written
// now), and each barrier names the buffer it protects. A reusable recording is submitted again
// and again until the next begin() (decode: recorded once, replayed for every token).
#pragma once

#include <volk.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "gpu/buffer.h"
#include "gpu/pipeline.h"

namespace infer::gpu {

class VulkanContext;

// A storage-buffer binding: a range of a buffer (offset aligned to the device's
// minStorageBufferOffsetAlignment).
struct Binding {
  const Buffer* buffer = nullptr;
  VkDeviceSize offset = 0;
  VkDeviceSize range = VK_WHOLE_SIZE;
};

// The whole of buffer b as a binding.
inline Binding whole(const Buffer& b) { return Binding{&b}; }

struct Groups {
  uint32_t x = 1;
  uint32_t y = 1;
  uint32_t z = 1;
};

class Recorder {
 public:
  static Result<std::unique_ptr<Recorder>> create(const VulkanContext& ctx);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Starts a recording, dropping the previous one (which must not be in flight). A reusable
  // recording may be submitted any number of times until the next begin(); its descriptor sets
  // and the buffers it binds must stay alive that long. Otherwise it is submitted once.
  Result<void> begin(bool reusable = false);
  // Records `pipeline` over `groups` workgroups with one buffer per pipeline binding.
  Result<void> dispatch(const Pipeline& pipeline, std::span<const Binding> bindings,
                        const void* push, uint32_t push_bytes, Groups groups);
  template <class Push>
  Result<void> dispatch(const Pipeline& pipeline, std::initializer_list<Binding> bindings,
                        const Push& push, Groups groups) {
    return dispatch(pipeline, std::span<const Binding>(bindings.begin(), bindings.size()), &push,
                    uint32_t(sizeof(Push)), groups);
  }
  // Records a buffer-to-buffer copy, ordered like a dispatch.
  void copy(const Buffer& src, VkDeviceSize src_offset, const Buffer& dst, VkDeviceSize dst_offset,
            VkDeviceSize bytes);
  // Ends the recording; every write becomes visible to later work and to the host.
  Result<void> end();
  // Submits the ended recording (ending it first when still recording) without waiting.
  Result<void> submit();
  // Waits for the submitted recording to finish.
  Result<void> wait();
  // submit() then wait(): the usual one-shot use, and one replay of a reusable recording.
  Result<void> submit_and_wait();

  // Host seconds of the last submit() (vkQueueSubmit) and wait() (fence wait: mostly GPU time).
  struct Timing {
    double submit_s = 0;
    double wait_s = 0;
  };
  const Timing& last_timing() const { return timing_; }
  const VulkanContext& context() const { return ctx_; }
  bool reusable() const { return reusable_; }

  // Bindings one dispatch may have: kMaxBindings, or fewer where the device's
  // maxPerStageDescriptorStorageBuffers is lower.
  static constexpr uint32_t kMaxBindings = 16;
  uint32_t max_bindings() const { return max_bindings_; }

  // Counts of the last recording, so tests can check barriers go only where data depends:
  // dispatches, buffer barriers, and pipeline-barrier commands (each a point where later work
  // waits for earlier work; one command holds every buffer barrier a dispatch needs).
  int dispatch_count() const { return dispatches_; }
  int barrier_count() const { return barriers_; }
  int barrier_command_count() const { return barrier_commands_; }

  // Profiling (taking effect at the next begin()): a GPU timestamp after every dispatch and copy,
  // so each one's time is the gap since the one before (barrier waits included). Fails where the
  // queue has no timestamps.
  Result<void> set_profiling(bool on);
  struct CommandTime {
    const char* label;  // the pipeline's name, or "copy"
    double us;
  };
  // The times of the last waited-on submission of a profiled recording, in recording order.
  Result<std::vector<CommandTime>> command_times() const;

 private:
  struct Use {
    VkBuffer buffer;
    bool write;
  };
  struct Pending {  // accesses since the buffer's last barrier
    VkPipelineStageFlags2 write_stages = 0;
    VkAccessFlags2 write_access = 0;
    VkPipelineStageFlags2 read_stages = 0;
  };

  explicit Recorder(const VulkanContext& ctx) : ctx_(ctx) {}
  // Emits the barriers `uses` need at `stage`, then records the uses as pending.
  void order(std::span<const Use> uses, VkPipelineStageFlags2 stage, VkAccessFlags2 write_access);
  Result<VkDescriptorSet> allocate_set(VkDescriptorSetLayout layout);
  // After a dispatch or copy of a profiled recording: a timestamp, labelled.
  void stamp(const char* label);

  const VulkanContext& ctx_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cb_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> descriptor_pools_;
  size_t current_pool_ = 0;
  std::unordered_map<VkBuffer, Pending> pending_;
  std::vector<VkBufferMemoryBarrier2> barrier_scratch_;
  enum class State { kEmpty, kRecording, kEnded, kInFlight };
  State state_ = State::kEmpty;
  bool reusable_ = false;
  Timing timing_;
  uint32_t max_bindings_ = 0;
  int dispatches_ = 0;
  int barriers_ = 0;
  int barrier_commands_ = 0;

  bool profile_next_ = false;  // set_profiling: for the next begin()
  bool profiling_ = false;     // this recording writes timestamps
  VkQueryPool queries_ = VK_NULL_HANDLE;
  uint32_t query_capacity_ = 0;
  double timestamp_ns_ = 0;  // nanoseconds per timestamp tick
  std::vector<const char*> labels_;  // of timestamps 1.. (0 marks the start)
};

}  // namespace infer::gpu
