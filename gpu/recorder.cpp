// Recorder: command buffer, descriptor sets from a growing list of pools, dependency tracking
// per buffer, submit and fence wait, and replays of a reusable recording.
#include "gpu/recorder.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/vk_check.h"

namespace infer::gpu {
namespace {

constexpr uint32_t kSetsPerPool = 256;
constexpr uint32_t kBuffersPerPool = 8 * kSetsPerPool;
// Timestamps of one profiled recording (a decode step of the largest model has ~1,000 commands).
constexpr uint32_t kMaxTimestamps = 8192;

}  // namespace

Result<std::unique_ptr<Recorder>> Recorder::create(const VulkanContext& ctx) {
  std::unique_ptr<Recorder> r(new Recorder(ctx));
  VkDevice dev = ctx.device();
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(ctx.physical_device(), &props);
  r->max_bindings_ = std::min<uint32_t>(kMaxBindings,
                                        props.limits.maxPerStageDescriptorStorageBuffers);
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = ctx.queue_family();
  INFER_TRY_VOID(
      vk_check(vkCreateCommandPool(dev, &pool_info, nullptr, &r->pool_), "vkCreateCommandPool"));
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = r->pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  INFER_TRY_VOID(
      vk_check(vkAllocateCommandBuffers(dev, &alloc, &r->cb_), "vkAllocateCommandBuffers"));
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  INFER_TRY_VOID(vk_check(vkCreateFence(dev, &fence_info, nullptr, &r->fence_), "vkCreateFence"));
  return r;
}

Recorder::~Recorder() {
  VkDevice dev = ctx_.device();
  // A recording still in flight (an error between submit and wait) must finish before its
  // command buffer and descriptor sets go.
  if (state_ == State::kInFlight) vkWaitForFences(dev, 1, &fence_, VK_TRUE, UINT64_MAX);
  if (fence_ != VK_NULL_HANDLE) vkDestroyFence(dev, fence_, nullptr);
  if (queries_ != VK_NULL_HANDLE) vkDestroyQueryPool(dev, queries_, nullptr);
  for (VkDescriptorPool p : descriptor_pools_) vkDestroyDescriptorPool(dev, p, nullptr);
  if (pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(dev, pool_, nullptr);  // frees cb_
}

Result<void> Recorder::begin(bool reusable) {
  INFER_CHECK(state_ != State::kInFlight, "Recorder::begin while the last recording is in flight");
  for (VkDescriptorPool p : descriptor_pools_) {
    INFER_TRY_VOID(vk_check(vkResetDescriptorPool(ctx_.device(), p, 0), "vkResetDescriptorPool"));
  }
  current_pool_ = 0;
  pending_.clear();
  dispatches_ = 0;
  barriers_ = 0;
  barrier_commands_ = 0;
  INFER_TRY_VOID(vk_check(vkResetCommandBuffer(cb_, 0), "vkResetCommandBuffer"));
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  // A replayed recording is never pending twice at once (each submit is waited on), so it
  // needs no SIMULTANEOUS_USE.
  begin.flags = reusable ? 0 : VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  state_ = State::kEmpty;  // a failed vkBeginCommandBuffer leaves nothing to submit
  INFER_TRY_VOID(vk_check(vkBeginCommandBuffer(cb_, &begin), "vkBeginCommandBuffer"));
  state_ = State::kRecording;
  reusable_ = reusable;
  profiling_ = profile_next_;
  labels_.clear();
  if (profiling_) {
    vkCmdResetQueryPool(cb_, queries_, 0, query_capacity_);
    vkCmdWriteTimestamp2(cb_, VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT, queries_, 0);
  }
  return Ok{};
}

Result<void> Recorder::set_profiling(bool on) {
  INFER_CHECK(state_ != State::kRecording, "Recorder::set_profiling while recording");
  if (on && queries_ == VK_NULL_HANDLE) {
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(ctx_.physical_device(), &n, nullptr);
    std::vector<VkQueueFamilyProperties> families(n);
    vkGetPhysicalDeviceQueueFamilyProperties(ctx_.physical_device(), &n, families.data());
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(ctx_.physical_device(), &props);
    if (ctx_.queue_family() >= n || families[ctx_.queue_family()].timestampValidBits == 0 ||
        props.limits.timestampPeriod <= 0) {
      return make_error(ErrorCode::kVulkan, "profiling: the compute queue has no timestamps");
    }
    timestamp_ns_ = props.limits.timestampPeriod;
    VkQueryPoolCreateInfo info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = kMaxTimestamps;
    INFER_TRY_VOID(vk_check(vkCreateQueryPool(ctx_.device(), &info, nullptr, &queries_),
                            "vkCreateQueryPool"));
    query_capacity_ = kMaxTimestamps;
  }
  profile_next_ = on;
  return Ok{};
}

void Recorder::stamp(const char* label) {
  if (!profiling_ || labels_.size() + 1 >= query_capacity_) return;  // past capacity: unlabelled
  labels_.push_back(label);
  vkCmdWriteTimestamp2(cb_, VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT, queries_,
                       uint32_t(labels_.size()));
}

Result<std::vector<Recorder::CommandTime>> Recorder::command_times() const {
  INFER_CHECK(profiling_ && state_ != State::kInFlight && state_ != State::kRecording,
              "Recorder::command_times: no finished profiled recording");
  const uint32_t n = uint32_t(labels_.size()) + 1;
  std::vector<uint64_t> ticks(n);
  INFER_TRY_VOID(vk_check(vkGetQueryPoolResults(ctx_.device(), queries_, 0, n,
                                                n * sizeof(uint64_t), ticks.data(),
                                                sizeof(uint64_t),
                                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                          "vkGetQueryPoolResults"));
  std::vector<CommandTime> out(labels_.size());
  for (size_t i = 0; i < labels_.size(); ++i) {
    out[i] = {labels_[i], double(ticks[i + 1] - ticks[i]) * timestamp_ns_ * 1e-3};
  }
  return out;
}

Result<VkDescriptorSet> Recorder::allocate_set(VkDescriptorSetLayout layout) {
  VkDevice dev = ctx_.device();
  for (;;) {
    if (current_pool_ == descriptor_pools_.size()) {
      VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kBuffersPerPool};
      VkDescriptorPoolCreateInfo info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      info.maxSets = kSetsPerPool;
      info.poolSizeCount = 1;
      info.pPoolSizes = &size;
      VkDescriptorPool pool = VK_NULL_HANDLE;
      INFER_TRY_VOID(
          vk_check(vkCreateDescriptorPool(dev, &info, nullptr, &pool), "vkCreateDescriptorPool"));
      descriptor_pools_.push_back(pool);
    }
    VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    alloc.descriptorPool = descriptor_pools_[current_pool_];
    alloc.descriptorSetCount = 1;
    alloc.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    VkResult r = vkAllocateDescriptorSets(dev, &alloc, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) {
      return make_error(ErrorCode::kVulkan,
                        std::string("vkAllocateDescriptorSets failed: ") + vk_result_name(r));
    }
    ++current_pool_;  // this pool is full: move on to the next, creating it if needed
  }
}

void Recorder::order(std::span<const Use> uses, VkPipelineStageFlags2 stage,
                     VkAccessFlags2 write_access) {
  // A barrier makes the earlier accesses available to every stage and access this recorder uses
  // (compute and copy), not just to this command's: pending_ forgets the buffer after it, so a
  // later reader of another stage (a shader after a copy) must already be covered, and so must a
  // buffer bound twice in one dispatch (read at one binding, written at another).
  constexpr VkPipelineStageFlags2 kAllStages =
      VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_2_COPY_BIT;
  constexpr VkAccessFlags2 kAllAccess =
      VK_ACCESS_2_SHADER_STORAGE_READ_BIT | VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT |
      VK_ACCESS_2_TRANSFER_READ_BIT | VK_ACCESS_2_TRANSFER_WRITE_BIT;
  barrier_scratch_.clear();
  for (const Use& u : uses) {
    auto it = pending_.find(u.buffer);
    if (it == pending_.end()) continue;
    const Pending& p = it->second;
    VkBufferMemoryBarrier2 b{VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER_2};
    if (p.write_stages != 0) {  // read- or write-after-write: make the earlier write visible
      b.srcStageMask = p.write_stages | p.read_stages;
      b.srcAccessMask = p.write_access;
    } else if (u.write) {  // write-after-read: the earlier reads must finish first
      b.srcStageMask = p.read_stages;
    } else {
      continue;  // read-after-read needs nothing
    }
    b.dstStageMask = kAllStages;
    b.dstAccessMask = kAllAccess;
    b.srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    b.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    b.buffer = u.buffer;
    b.offset = 0;
    b.size = VK_WHOLE_SIZE;
    bool seen = false;  // one barrier per buffer, even if it is bound twice
    for (VkBufferMemoryBarrier2& o : barrier_scratch_) {
      if (o.buffer != u.buffer) continue;
      seen = true;
      o.srcStageMask |= b.srcStageMask;
      o.srcAccessMask |= b.srcAccessMask;
    }
    if (!seen) barrier_scratch_.push_back(b);
  }
  if (!barrier_scratch_.empty()) {
    VkDependencyInfo dep{VK_STRUCTURE_TYPE_DEPENDENCY_INFO};
    dep.bufferMemoryBarrierCount = uint32_t(barrier_scratch_.size());
    dep.pBufferMemoryBarriers = barrier_scratch_.data();
    vkCmdPipelineBarrier2(cb_, &dep);
    barriers_ += int(barrier_scratch_.size());
    ++barrier_commands_;
  }
  for (const VkBufferMemoryBarrier2& b : barrier_scratch_) pending_.erase(b.buffer);
  for (const Use& u : uses) {
    Pending& p = pending_[u.buffer];
    if (u.write) {
      p.write_stages |= stage;
      p.write_access |= write_access;
    } else {
      p.read_stages |= stage;
    }
  }
}

Result<void> Recorder::dispatch(const Pipeline& pipeline, std::span<const Binding> bindings,
                                const void* push, uint32_t push_bytes, Groups groups) {
  INFER_CHECK(state_ == State::kRecording, "%s: dispatch outside begin()/end()",
              pipeline.name().c_str());
  INFER_CHECK(bindings.size() == pipeline.bindings().size(), "%s: %zu bindings, pipeline has %zu",
              pipeline.name().c_str(), bindings.size(), pipeline.bindings().size());
  INFER_CHECK(push_bytes == pipeline.push_bytes(), "%s: %u push bytes, pipeline takes %u",
              pipeline.name().c_str(), push_bytes, pipeline.push_bytes());
  const DeviceInfo& info = ctx_.info();
  INFER_CHECK(groups.x <= info.max_workgroup_count[0] && groups.y <= info.max_workgroup_count[1] &&
                  groups.z <= info.max_workgroup_count[2],
              "%s: %u x %u x %u workgroups", pipeline.name().c_str(), groups.x, groups.y, groups.z);

  INFER_TRY(VkDescriptorSet set, allocate_set(pipeline.set_layout()));
  VkDescriptorBufferInfo infos[kMaxBindings];
  VkWriteDescriptorSet writes[kMaxBindings];
  Use uses[kMaxBindings];
  INFER_CHECK(bindings.size() <= max_bindings_,
              "%s: %zu bindings, more than %u (the device's maxPerStageDescriptorStorageBuffers "
              "or the Recorder's own limit)",
              pipeline.name().c_str(), bindings.size(), max_bindings_);
  for (size_t i = 0; i < bindings.size(); ++i) {
    const Binding& b = bindings[i];
    INFER_CHECK(b.buffer != nullptr && b.buffer->handle() != VK_NULL_HANDLE,
                "%s: binding %zu has no buffer", pipeline.name().c_str(), i);
    INFER_CHECK(b.offset % info.min_storage_buffer_offset_alignment == 0,
                "%s: binding %zu (\"%s\") offset %llu not aligned", pipeline.name().c_str(), i,
                b.buffer->name().c_str(), (unsigned long long)b.offset);
    infos[i] = {b.buffer->handle(), b.offset, b.range};
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = uint32_t(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
    uses[i] = {b.buffer->handle(), pipeline.bindings()[i] != Access::kRead};
  }
  vkUpdateDescriptorSets(ctx_.device(), uint32_t(bindings.size()), writes, 0, nullptr);

  order(std::span<const Use>(uses, bindings.size()), VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
        VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT);
  vkCmdBindPipeline(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle());
  vkCmdBindDescriptorSets(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout(), 0, 1, &set, 0,
                          nullptr);
  if (push_bytes != 0) {
    vkCmdPushConstants(cb_, pipeline.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
  }
  vkCmdDispatch(cb_, groups.x, groups.y, groups.z);
  ++dispatches_;
  stamp(pipeline.name().c_str());
  return Ok{};
}

void Recorder::copy(const Buffer& src, VkDeviceSize src_offset, const Buffer& dst,
                    VkDeviceSize dst_offset, VkDeviceSize bytes) {
  INFER_CHECK(state_ == State::kRecording, "copy outside begin()/end()");
  INFER_CHECK(src_offset + bytes <= src.size() && dst_offset + bytes <= dst.size(),
              "copy of %llu bytes from \"%s\" to \"%s\" out of range", (unsigned long long)bytes,
              src.name().c_str(), dst.name().c_str());
  const Use uses[2] = {{src.handle(), false}, {dst.handle(), true}};
  order(uses, VK_PIPELINE_STAGE_2_COPY_BIT, VK_ACCESS_2_TRANSFER_WRITE_BIT);
  VkBufferCopy region{src_offset, dst_offset, bytes};
  vkCmdCopyBuffer(cb_, src.handle(), dst.handle(), 1, &region);
  stamp("copy");
}

Result<void> Recorder::end() {
  INFER_CHECK(state_ == State::kRecording, "Recorder::end without begin()");
  // Writes of this recording become visible to later submissions (a replay of itself included)
  // and to the host.
  record_make_visible(cb_, VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_2_COPY_BIT,
                      VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT | VK_ACCESS_2_TRANSFER_WRITE_BIT);
  state_ = State::kEmpty;
  INFER_TRY_VOID(vk_check(vkEndCommandBuffer(cb_), "vkEndCommandBuffer"));
  state_ = State::kEnded;
  return Ok{};
}

Result<void> Recorder::submit() {
  if (state_ == State::kRecording) INFER_TRY_VOID(end());
  INFER_CHECK(state_ == State::kEnded, "Recorder::submit: %s",
              state_ == State::kInFlight ? "the last submit was not waited on"
                                         : "nothing recorded (a one-time recording runs once)");
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cb_;
  INFER_TRY_VOID(vk_check(vkQueueSubmit(ctx_.queue(), 1, &submit, fence_), "vkQueueSubmit"));
  state_ = State::kInFlight;
  timing_.submit_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return Ok{};
}

Result<void> Recorder::wait() {
  INFER_CHECK(state_ == State::kInFlight, "Recorder::wait without submit()");
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  INFER_TRY_VOID(
      vk_check(vkWaitForFences(ctx_.device(), 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences"));
  timing_.wait_s = std::chrono::duration<double>(Clock::now() - t0).count();
  // A one-time recording is spent; a reusable one may be submitted again.
  state_ = reusable_ ? State::kEnded : State::kEmpty;
  return vk_check(vkResetFences(ctx_.device(), 1, &fence_), "vkResetFences");
}

Result<void> Recorder::submit_and_wait() {
  INFER_TRY_VOID(submit());
  return wait();
}

}  // namespace infer::gpu
