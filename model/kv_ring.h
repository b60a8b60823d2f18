// The KV ring's bookkeeping (DESIGN.md §4): which slot of the [anchors | window | recall] buffer
// holds which token, which slots a chunk attends and in what order, where its tokens go and whom
// they evict. Host-only and backend-neutral: the CPU cache and the Vulkan path both take the plan
// from here and only store and read rows at the slots it names.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"

namespace infer {

enum class EvictPolicy { kFifo, kMass };

struct RingConfig {
  int64_t anchors = 32;  // A: the stream's first tokens, never evicted (attention sinks)
  int64_t window = 512;  // W: the most recent tokens
  int64_t recall = 96;   // R <= kMaxRecall: rows placed from outside (episodic memory)
  EvictPolicy evict = EvictPolicy::kFifo;
  // kMass: the newest tokens of the window that are never evicted (their mass is still young);
  // < 0: min(32, W / 4). Clamped to W - 1 so that a victim always exists.
  int64_t protect_recent = -1;
};
inline constexpr int64_t kMaxRecall = 128;

// Checks A >= 0, W >= 1, 0 <= R <= kMaxRecall.
Result<void> validate(const RingConfig& cfg);

// A token leaving the window: its logical position, id and the slot its rows are still in.
struct EvictedToken {
  int64_t pos = 0;
  int32_t id = 0;
  int32_t slot = 0;
};

// One chunk of T tokens at logical positions pos0 .. pos0+T-1, as the tiered (full-attention)
// layers see it. Cache positions (what RoPE sees) are indices into key_slots: the chunk attends
// key_slots[i] at cache position i, and its token t sits at cache position n_keys + t. While no
// token was evicted and the recall tier is empty, cache position = logical position (exact).
struct RingPlan {
  int64_t pos0 = 0;
  int64_t T = 0;
  int64_t n_keys = 0;
  std::span<const int32_t> key_slots;     // [n_keys]: anchors, recall, window oldest first
  std::span<const int32_t> write_slots;   // [T]: where token t's rows go (after attending)
  std::span<const EvictedToken> evicted;  // window tokens whose slots this chunk overwrites
};

class KvRing {
 public:
  // Allocates all bookkeeping; nothing is allocated afterwards. cfg must pass validate().
  explicit KvRing(const RingConfig& cfg);

  const RingConfig& config() const { return cfg_; }
  // Slots of a tiered layer: anchors [0, A), window [A, A+W), recall [A+W, A+W+R).
  int64_t capacity() const { return cfg_.anchors + cfg_.window + cfg_.recall; }
  // The longest chunk plan() takes: every token of a chunk must enter the window, so W under
  // FIFO and W - protect under mass (victims come from the unprotected part).
  int64_t max_chunk() const;
  int64_t protect_recent() const { return protect_; }

  // Plans the chunk ids [T] at pos0 (pos0 = tokens streamed since reset); ids must stay valid
  // until commit(). Allocates nothing.
  const RingPlan& plan(int64_t pos0, const int32_t* ids, int64_t T);
  const RingPlan& current() const { return plan_; }
  // mass [plan.n_keys]: attention probability each attended key received in this chunk (summed
  // over heads, queries and full layers); kept per slot for kMass eviction (and, on recall
  // slots, for probes: set_recall starts them at 0). Before commit().
  void add_mass(const float* mass);
  // The planned chunk's rows are stored: the tiers now hold it.
  void commit();

  // The recall tier holds these n <= R tokens (replacing what it held) at slots A+W .. A+W+n-1,
  // attended at cache positions after the anchors, before the window. The caller writes their
  // rows to those slots.
  Result<void> set_recall(std::span<const int64_t> pos, std::span<const int32_t> ids);
  void reset();  // empty tiers (a new stream at position 0)
  // The state after n tokens streamed under FIFO with nothing recalled (ids 0): for benchmarks
  // that fill the rows with synthetic values instead of running n real tokens.
  void synthesize_context(int64_t n);

  int64_t n_anchors() const { return n_anchors_; }
  int64_t n_window() const { return n_window_; }
  int64_t n_recall() const { return n_recall_; }
  int64_t pos_of(int32_t slot) const { return pos_[size_t(slot)]; }
  int32_t id_of(int32_t slot) const { return id_[size_t(slot)]; }
  float mass_of(int32_t slot) const { return mass_[size_t(slot)]; }
  // The anchor or window slot holding logical position pos, or -1.
  int32_t find(int64_t pos) const;

 private:
  int32_t window_slot(int64_t i) const { return int32_t(cfg_.anchors + i); }
  // The k victims among order_ (window slots oldest first), written to victims_ by position.
  void choose_victims(int64_t k);

  RingConfig cfg_;
  int64_t protect_ = 0;
  int64_t n_anchors_ = 0, n_window_ = 0, n_recall_ = 0;
  std::vector<int64_t> pos_;    // [capacity]: logical position of the token in each slot
  std::vector<int32_t> id_;     // [capacity]
  std::vector<float> mass_;     // [capacity]: accumulated attention (window slots)
  std::vector<int32_t> order_;  // [W]: window slots by logical position, oldest first
  // The current plan's storage.
  std::vector<int32_t> key_slots_, write_slots_, victims_;
  std::vector<EvictedToken> evicted_;
  std::vector<char> is_victim_;  // [capacity]
  int64_t fill_anchors_ = 0;     // tokens of the planned chunk that go to the anchors
  const int32_t* chunk_ids_ = nullptr;  // the planned chunk's ids (the caller's, until commit)
  RingPlan plan_;
};

}  // namespace infer
