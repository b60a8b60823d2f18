// Engine: the per-token loop the stream actor schedules (STYLE.md, Actors stay thin). It owns the
// sampler and the context of one conversation over a Forward; no CAF. Input is appended as
// pending ids and fed (prefilled) before the next step; each step samples one token from the
// logits of the last fed position, and a generated token joins the context at once (it is fed
// by the following step, or by the next turn's prefill when generation stops there).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "actors/tracer.h"
#include "base/result.h"
#include "model/forward.h"
#include "model/sampling.h"

namespace infer::actors {

struct EngineOptions {
  SamplingParams sampling;
  std::vector<int32_t> end_ids;  // end-of-turn ids: sampling one ends the turn
  int64_t max_positions = 0;     // the Forward's stream length
  int64_t prefill_chunk = 128;   // ids per prefill call; the interrupt is checked between them
  Tracer* tracer = nullptr;      // a "prefill chunk" span per chunk (on the stream's track)
};

// One step's outcome and the gate's signals (DESIGN.md §3), measured on the distribution the
// token was drawn from (softmax(logits / T), T = 1 when greedy).
struct Step {
  int32_t id = 0;
  bool end = false;       // id is an end-of-turn id: not added to the context
  int64_t position = 0;   // the context position the token takes
  float entropy = 0.0f;
  float top_prob = 0.0f;
  float eot_prob = 0.0f;
};

class Engine {
 public:
  // `forward` is shared so that whoever built it (and its device) lives as long as the engine.
  Engine(std::shared_ptr<Forward> forward, EngineOptions opts);

  // Adds ids to the context (pending until fed). Ids outside the vocabulary are an error and
  // nothing is added.
  Result<void> append(std::span<const int32_t> ids);
  // Feeds the pending ids in chunks; between chunks, stops early when stop() says so and keeps
  // the rest pending. Returns whether everything was fed.
  Result<bool> feed(const std::function<bool()>& stop);
  // Feeds what is pending (the previous token), then samples the next token. Needs a non-empty
  // context.
  Result<Step> step();
  // Forgets the conversation; the sampler restarts from its seed.
  void reset();
  // Sampling for the steps until cleared (a request's own settings, e.g. --serve's GENERATE):
  // a sampler of its own, seeded from params.seed; nullptr goes back to the session's sampler,
  // whose random stream is left where it was.
  void set_request_sampling(const SamplingParams* params);
  // false: end ids are ordinary tokens (Step::end stays false, they join the context) until set
  // back to true.
  void set_stop_at_end(bool stop) { stop_at_end_ = stop; }

  // Whether the context can take another token.
  bool full() const { return int64_t(context_.size()) >= opts_.max_positions; }
  int64_t position() const { return int64_t(context_.size()); }  // fed and pending
  int64_t fed() const { return forward_->position(); }
  const std::vector<int32_t>& context() const { return context_; }
  const EngineOptions& options() const { return opts_; }
  bool is_end(int32_t id) const;

  // Time spent in the forward pass (prefill and decode), over the session.
  double prefill_ms() const { return prefill_ms_; }
  double decode_ms() const { return decode_ms_; }
  int64_t prefilled() const { return prefilled_; }
  int64_t decoded() const { return decoded_; }
  // Recent decode cost (exponential average), for the gate.
  float ms_per_token() const { return ms_per_token_; }

 private:
  Result<void> feed_range(std::span<const int32_t> ids);
  float end_probability(std::span<const float> logits) const;

  std::shared_ptr<Forward> forward_;
  EngineOptions opts_;
  Sampler sampler_;
  std::optional<Sampler> request_sampler_;  // set_request_sampling
  bool stop_at_end_ = true;
  Sampler& active_sampler() { return request_sampler_ ? *request_sampler_ : sampler_; }
  const Sampler& active_sampler() const { return request_sampler_ ? *request_sampler_ : sampler_; }
  std::vector<float> logits_;    // [V] of the last fed position
  bool have_logits_ = false;
  std::vector<int32_t> context_;  // every id of the conversation, fed or not
  double prefill_ms_ = 0.0, decode_ms_ = 0.0;
  int64_t prefilled_ = 0, decoded_ = 0;
  float ms_per_token_ = 0.0f;
};

}  // namespace infer::actors
