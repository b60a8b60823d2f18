// Engine: pending ids are context_[fed(), position()); feeding them is a prefill (input) or a
// decode (the previous step's token), timed for the stats and the gate's cost signal. run_turn()
// is the per-token loop every generator shares.
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
  // Reserved so that committing a token never allocates; a stream without an end (the ring)
  // grows past this geometrically, rarely.
  context_.reserve(size_t(std::min<int64_t>(opts_.max_positions, int64_t(1) << 20)));
  const Result<void> started = append(opts_.preamble);
  INFER_CHECK(started.ok(), "the preamble: %s", started.error().message.c_str());
  INFER_CHECK((opts_.boundary.ready == nullptr) == !opts_.boundary.take,
              "BoundaryInput needs both ready and take");
  // An interrupt's framed text (8 KiB at most by default) fits without a reallocation.
  if (opts_.boundary.ready != nullptr) inject_ids_.reserve(size_t(16) << 10);
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
    return make_error(ErrorCode::kContextFull,
                      "the context would hold " + std::to_string(position() + ids.size()) +
                          " tokens, the stream takes " + std::to_string(opts_.max_positions) +
                          " (use /reset)");
  }
  context_.insert(context_.end(), ids.begin(), ids.end());
  observe(ids);
  return Ok{};
}

void Engine::account_decode(double ms) {
  decode_ms_ += ms;
  last_decode_ms_ = ms;
  ++decoded_;
  // A short memory: the gate's cost signal follows load changes within a few tokens.
  ms_per_token_ = ms_per_token_ == 0.0f ? float(ms) : 0.8f * ms_per_token_ + 0.2f * float(ms);
}

// Input is prefilled, even a single id; the previous step's token alone is decoded (the GPU
// records the two differently, and generation has always decoded it).
Result<void> Engine::feed_range(std::span<const int32_t> ids) {
  const auto t0 = Clock::now();
  if (ids.size() == 1 && fed() == decode_at_) {
    INFER_TRY_VOID(forward_->decode(ids[0], logits_.data()));
    account_decode(ms_since(t0));
  } else {
    TraceScope chunk(opts_.tracer, "stream", "prefill chunk", int64_t(ids.size()));
    if (opts_.prompt_logits) {
      all_logits_.resize(ids.size() * logits_.size());
      INFER_TRY_VOID(forward_->prefill(ids, all_logits_.data(), true));
      INFER_TRY_VOID(opts_.prompt_logits(all_logits_, int64_t(ids.size())));
      std::copy(all_logits_.end() - ptrdiff_t(logits_.size()), all_logits_.end(), logits_.begin());
    } else {
      INFER_TRY_VOID(forward_->prefill(ids, logits_.data()));
    }
    prefill_ms_ += ms_since(t0);
    prefilled_ += int64_t(ids.size());
  }
  have_logits_ = true;
  argmax_id_ = -1;
  return Ok{};
}

Result<bool> Engine::feed(const std::function<bool()>& stop, int64_t hold) {
  while (fed() < position() - hold) {
    if (stop && stop()) return false;
    const int64_t n = std::min(opts_.prefill_chunk, position() - hold - fed());
    INFER_TRY_VOID(feed_range(std::span(context_).subspan(size_t(fed()), size_t(n))));
  }
  return true;
}

Result<Step> Engine::sample_next() {
  Step s;
  // The device's argmax knows nothing of the repeat penalty: penalised steps sample on the host.
  const bool greedy =
      active_sampler().params().temperature <= 0.0f && !active_sampler().penalises();
  if (opts_.decode_argmax && greedy && position() - fed() == 1 && fed() == decode_at_) {
    const auto t0 = Clock::now();
    INFER_TRY(s.id, opts_.decode_argmax(context_.back()));
    account_decode(ms_since(t0));
    have_logits_ = false;  // the device kept them
    argmax_id_ = s.id;
  } else {
    INFER_TRY(bool all_fed, feed(nullptr));
    INFER_CHECK(all_fed, "feed without a stop predicate stopped");
    if (have_logits_) {
      s.id = active_sampler().sample(logits_);
      s.entropy = active_sampler().signals().entropy;
      s.top_prob = active_sampler().signals().top_prob;
      s.eot_prob = end_probability(logits_);
    } else if (argmax_id_ >= 0) {  // a refused token, taken on the device: offered again
      s.id = argmax_id_;
    } else {
      return make_error(ErrorCode::kEmptyContext, "nothing to continue: the context is empty");
    }
  }
  s.position = position();
  s.ms_per_token = ms_per_token_;
  s.end = stop_at_end_ && is_end(s.id);
  return s;
}

Result<Step> Engine::step() {
  INFER_TRY(Step s, sample_next());
  if (!s.end) commit(s);
  return s;
}

void Engine::observe(std::span<const int32_t> ids) {
  sampler_.observe(ids);
  if (request_sampler_) request_sampler_->observe(ids);
}

void Engine::commit(const Step& s) {
  context_.push_back(s.id);
  observe(std::span(&s.id, 1));
  decode_at_ = s.position;
}

bool Engine::interrupted(const TurnControl& t) const {
  if (t.control == nullptr) return false;
  return t.control->interrupt_epoch.load(std::memory_order_relaxed) != t.epoch ||
         t.control->shutting_down.load(std::memory_order_relaxed);
}

// Waits until the gate is fewer than kGateLead tokens behind. The tokens reach the gate by
// message; the wait is on an atomic the gate bumps, never on the scheduler.
void Engine::wait_for_gate(const TurnControl& t) const {
  if (t.control == nullptr || t.turn == 0) return;
  const Control& c = *t.control;
  for (int64_t seen = c.gate_seen.load(); emitted_ - seen >= kGateLead; seen = c.gate_seen.load()) {
    if (c.shutting_down.load()) return;
    c.gate_seen.wait(seen);
  }
}

TurnOutcome Engine::run_turn(const TurnRequest& req, TokenSink& sink) {
  TurnOutcome out;
  const double prefill_ms0 = prefill_ms_, decode_ms0 = decode_ms_;
  const int64_t prefilled0 = prefilled_;
  Result<void> appended_input = append(req.input);
  if (appended_input) sink.appended(position(), int64_t(req.input.size()));
  if (!appended_input) {
    out.reason = StopReason::kError;
    out.error = appended_input.error();
  } else if (Result<bool> all_fed = [&]() -> Result<bool> {
               TraceScope prefill(opts_.tracer, "stream", "prefill", position() - fed());
               const auto stop = [&] { return interrupted(req.control); };
               if (!opts_.before_generate) return feed(stop);
               // The last id waits for the turn that generates (--serve's APPENDs are turns of
               // their own), so that the hook sees it pending and what it places is attended
               // from that turn's first token on.
               if (req.max_tokens <= 0) return feed(stop, 1);
               if (position() > fed()) {
                 INFER_TRY(bool fed_but_last, feed(stop, 1));
                 if (!fed_but_last) return false;
               }
               // Everything may be fed already (a memory store read the window): the hook still
               // sees the new positions; the first token was computed without what it places.
               if (hooked_until_ < position()) {
                 opts_.before_generate(hooked_until_, position() - hooked_until_);
                 hooked_until_ = position();
               }
               return feed(stop);
             }();
             !all_fed) {
    out.reason = StopReason::kError;
    out.error = all_fed.error();
  } else if (!*all_fed) {
    out.reason = StopReason::kInterrupted;
  } else if (req.max_tokens > 0) {
    generate(req, sink, out);
  }
  out.prefilled = prefilled_ - prefilled0;
  out.prefill_ms = prefill_ms_ - prefill_ms0;
  out.decode_ms = decode_ms_ - decode_ms0;
  return out;
}

void Engine::generate(const TurnRequest& req, TokenSink& sink, TurnOutcome& out) {
  const TurnControl& ctl = req.control;
  set_stop_at_end(req.end_ids != EndIds::kIgnore);
  if (req.sampling != nullptr) set_request_sampling(req.sampling);
  out.reason = StopReason::kTokenLimit;
  for (int64_t index = 0; index < req.max_tokens; ++index) {
    wait_for_gate(ctl);
    if (interrupted(ctl)) {
      out.reason = StopReason::kInterrupted;
      break;
    }
    if (ctl.control != nullptr && ctl.gate_may_stop && ctl.turn != 0 &&
        ctl.control->gate_stop_turn.load(std::memory_order_relaxed) == ctl.turn) {
      out.reason = StopReason::kGate;
      break;
    }
    // The one atomic load a token costs while nothing is acked.
    if (opts_.boundary.ready != nullptr &&
        opts_.boundary.ready->load(std::memory_order_relaxed) != 0 && !inject(sink, out)) {
      break;
    }
    if (full()) {
      out.reason = StopReason::kContextFull;
      break;
    }
    TraceScope token(opts_.tracer, "stream", "token", index);
    Result<Step> r = sample_next();
    if (!r) {
      out.reason = StopReason::kError;
      out.error = r.error();
      break;
    }
    Step& s = *r;
    s.index = index;
    if (s.end && req.end_ids == EndIds::kStopBefore) {
      out.reason = StopReason::kEndToken;
      out.stop_id = s.id;
      break;
    }
    const Verdict v = sink.token(s);
    if (v == Verdict::kRefuse) {
      out.reason = StopReason::kSink;
      break;
    }
    commit(s);
    ++emitted_;
    ++out.generated;
    if (s.end) {  // EndIds::kStopAfter: emitted and kept
      out.reason = StopReason::kEndToken;
      out.stop_id = s.id;
      break;
    }
    if (std::find(req.stop_ids.begin(), req.stop_ids.end(), s.id) != req.stop_ids.end()) {
      out.reason = StopReason::kStopId;
      out.stop_id = s.id;
      break;
    }
    if (v == Verdict::kLast) {
      out.reason = StopReason::kSink;
      break;
    }
  }
  set_request_sampling(nullptr);  // the next turn samples with the session's settings
  set_stop_at_end(true);
}

bool Engine::inject(TokenSink& sink, TurnOutcome& out) {
  TraceScope span(opts_.tracer, "stream", "inject");
  inject_ids_.clear();
  // One position stays free for the token generated after the injection.
  const int64_t room = std::max<int64_t>(0, opts_.max_positions - position() - 1);
  switch (opts_.boundary.take(inject_ids_, room)) {
    case Injection::kNothing:
      return true;
    case Injection::kNoRoom:
      out.reason = StopReason::kContextFull;
      return false;
    case Injection::kIds:
      break;
  }
  if (inject_ids_.empty()) return true;
  if (int64_t(inject_ids_.size()) > room) {
    out.reason = StopReason::kError;
    out.error = make_error(ErrorCode::kInternal,
                           "an injection of " + std::to_string(inject_ids_.size()) +
                               " ids was given room for " + std::to_string(room));
    return false;
  }
  if (Result<void> r = append(inject_ids_); !r) {
    out.reason = StopReason::kError;
    out.error = r.error();
    return false;
  }
  injected_ += int64_t(inject_ids_.size());
  sink.injected(position(), int64_t(inject_ids_.size()));
  return true;
}

// P(any end id) under softmax(logits / T): the top token has probability exp(0) / z = top_prob,
// so p_i = exp((l_i - max) / T) * top_prob; the sampler's pass already found the max.
float Engine::end_probability(std::span<const float> raw_logits) const {
  if (opts_.end_ids.empty()) return 0.0f;
  const Sampler& sampler = active_sampler();
  const std::span<const float> logits = sampler.sampled_logits(raw_logits);  // as drawn from
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
  argmax_id_ = -1;
  decode_at_ = -1;
  hooked_until_ = 0;
  sampler_.reseed(opts_.sampling.seed);
  sampler_.forget_context();
  request_sampler_.reset();
  prefill_ms_ = decode_ms_ = 0.0;
  prefilled_ = decoded_ = 0;
  ms_per_token_ = 0.0f;
  const Result<void> started = append(opts_.preamble);  // checked once, at construction
  INFER_CHECK(started.ok(), "the preamble: %s", started.error().message.c_str());
}

void Engine::set_request_sampling(const SamplingParams* params) {
  if (params == nullptr) {
    request_sampler_.reset();
  } else {
    request_sampler_.emplace(forward_->vocab_size(), *params);
    request_sampler_->observe(context_);  // keeps only the last repeat_last_n
  }
}

}  // namespace infer::actors
