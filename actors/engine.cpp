// Engine: pending ids are context_[fed(), position()); feeding them is a prefill (several ids) or
// a decode (one: the previous step's token), timed for the stats and the gate's cost signal.
#include "actors/engine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "base/check.h"

namespace infer::actors {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

Engine::Engine(std::shared_ptr<Forward> forward, EngineOptions opts)
    : forward_(std::move(forward)),
      opts_(std::move(opts)),
      sampler_(forward_->vocab_size(), opts_.sampling),
      logits_(size_t(forward_->vocab_size())) {
  INFER_CHECK(opts_.max_positions > 0, "max_positions %lld", (long long)opts_.max_positions);
  INFER_CHECK(opts_.prefill_chunk > 0, "prefill_chunk %lld", (long long)opts_.prefill_chunk);
  context_.reserve(size_t(opts_.max_positions));
}

bool Engine::is_end(int32_t id) const {
  return std::find(opts_.end_ids.begin(), opts_.end_ids.end(), id) != opts_.end_ids.end();
}

Result<void> Engine::append(std::span<const int32_t> ids) {
  const int64_t V = forward_->vocab_size();
  for (int32_t id : ids) {
    if (id < 0 || id >= V) {
      return make_error(ErrorCode::kInvalidArgument, "token id " + std::to_string(id) +
                                                         " is outside the vocabulary (" +
                                                         std::to_string(V) + " tokens)");
    }
  }
  if (position() + int64_t(ids.size()) > opts_.max_positions) {
    return make_error(ErrorCode::kInvalidArgument,
                      "the context would hold " + std::to_string(position() + ids.size()) +
                          " tokens, the stream takes " + std::to_string(opts_.max_positions) +
                          " (use /reset)");
  }
  context_.insert(context_.end(), ids.begin(), ids.end());
  return Ok{};
}

Result<void> Engine::feed_range(std::span<const int32_t> ids) {
  const auto t0 = Clock::now();
  if (ids.size() == 1) {
    INFER_TRY_VOID(forward_->decode(ids[0], logits_.data()));
    const double ms = ms_since(t0);
    decode_ms_ += ms;
    ++decoded_;
    // A short memory: the gate's cost signal follows load changes within a few tokens.
    ms_per_token_ = ms_per_token_ == 0.0f ? float(ms) : 0.8f * ms_per_token_ + 0.2f * float(ms);
  } else {
    TraceScope chunk(opts_.tracer, "stream", "prefill chunk", int64_t(ids.size()));
    INFER_TRY_VOID(forward_->prefill(ids, logits_.data()));
    prefill_ms_ += ms_since(t0);
    prefilled_ += int64_t(ids.size());
  }
  have_logits_ = true;
  return Ok{};
}

Result<bool> Engine::feed(const std::function<bool()>& stop) {
  while (fed() < position()) {
    if (stop && stop()) return false;
    const int64_t n = std::min(opts_.prefill_chunk, position() - fed());
    INFER_TRY_VOID(feed_range(std::span(context_).subspan(size_t(fed()), size_t(n))));
  }
  return true;
}

Result<Step> Engine::step() {
  INFER_TRY(bool all_fed, feed(nullptr));
  INFER_CHECK(all_fed, "feed without a stop predicate stopped");
  if (!have_logits_) {
    return make_error(ErrorCode::kInvalidArgument, "nothing to continue: the context is empty");
  }
  Step s;
  s.id = active_sampler().sample(logits_);
  s.position = position();
  s.entropy = active_sampler().signals().entropy;
  s.top_prob = active_sampler().signals().top_prob;
  s.eot_prob = end_probability(logits_);
  s.end = stop_at_end_ && is_end(s.id);
  if (!s.end) context_.push_back(s.id);
  return s;
}

// P(any end id) under softmax(logits / T): the top token has probability exp(0) / z = top_prob,
// so p_i = exp((l_i - max) / T) * top_prob; the sampler's pass already found the max.
float Engine::end_probability(std::span<const float> logits) const {
  if (opts_.end_ids.empty()) return 0.0f;
  const Sampler& sampler = active_sampler();
  const float max_logit = sampler.signals().max_logit;
  if (!std::isfinite(max_logit)) return 0.0f;  // no distribution (top_prob is 1 by convention)
  const float T = sampler.params().temperature > 0 ? sampler.params().temperature : 1.0f;
  double p = 0.0;
  for (int32_t id : opts_.end_ids) {
    if (id < 0 || id >= int64_t(logits.size())) continue;
    const float l = logits[size_t(id)];
    if (l == l) p += std::exp(double(l - max_logit) / T);
  }
  return float(std::min(1.0, p * double(sampler.signals().top_prob)));
}

void Engine::reset() {
  forward_->reset();
  context_.clear();
  have_logits_ = false;
  sampler_.reseed(opts_.sampling.seed);
  request_sampler_.reset();
  prefill_ms_ = decode_ms_ = 0.0;
  prefilled_ = decoded_ = 0;
  ms_per_token_ = 0.0f;
}

void Engine::set_request_sampling(const SamplingParams* params) {
  if (params == nullptr) {
    request_sampler_.reset();
  } else {
    request_sampler_.emplace(forward_->vocab_size(), *params);
  }
}

}  // namespace infer::actors
