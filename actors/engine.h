// Engine: the one per-token loop (STYLE.md, Actors stay thin). It owns the sampler and the
// context of one conversation over a Forward; no CAF. Every generator calls run_turn(): the
// stream actor, one-shot generation, the benches. Input is appended as pending ids and fed
// (prefilled) before the next step; each step samples one token from the logits of the last fed
// position, hands it to a TokenSink and, unless the sink refuses it, commits it to the context
// (it is fed by the following step, or by the next turn's prefill when generation stops there).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "actors/control.h"
#include "actors/events.h"
#include "actors/tracer.h"
#include "base/result.h"
#include "model/forward.h"
#include "model/sampling.h"

namespace infer::actors {

// What BoundaryInput::take found.
enum class Injection : uint8_t {
  kNothing,  // nothing waits (the count was stale)
  kIds,      // ids to join the context
  kNoRoom,   // something waits that does not fit in `room`: it keeps waiting, the turn ends
};

// Ids that join the context between two generated tokens (acked interrupts: docs/TOOLS.md
// "Interrupts", actors/interrupt_injection.h frames them). Per token the loop does one relaxed
// load of *ready and nothing else while it reads 0; only then is take called, on the loop's
// thread, to write at most `room` ids into `ids` (empty, its capacity kept). They are appended
// after the last generated token and fed (prefilled with it) before the next step.
struct BoundaryInput {
  const std::atomic<int64_t>* ready = nullptr;  // null: no injection
  std::function<Injection(std::vector<int32_t>& ids, int64_t room)> take;
};

struct EngineOptions {
  SamplingParams sampling;
  std::vector<int32_t> end_ids;  // end-of-turn ids (cli/session.h end_of_turn_ids)
  // The most ids the context holds; the last is never fed unless generation goes on, so the
  // Forward's stream length + 1 is the most that fits.
  int64_t max_positions = 0;
  int64_t prefill_chunk = 128;   // ids per prefill call; the interrupt is checked between them
  Tracer* tracer = nullptr;      // "prefill chunk" and "token" spans (on the stream's track)
  // Greedy steps may feed the previous token and take the argmax on the device, returning only
  // the id (gpu::GpuForward::decode_greedy): no logits come back, so such steps carry no
  // signals. Empty: every step samples host logits.
  std::function<Result<int32_t>(int32_t id)> decode_argmax;
  // Ids every context starts with, at construction and after each reset (--serve --system's
  // system turn); fed with the first turn's input. Empty: none.
  std::vector<int32_t> preamble;
  // Before a turn generates, with the positions [pos, pos + n) appended since the last call (or
  // the start): called once all of them but the last id are fed, so that what it places in the
  // context (episodic memory's recalled rows in the ring's recall tier, DESIGN.md §5) is
  // attended from the turn's first token on. With it, an input-only turn leaves its last id
  // pending for the next generating turn. Empty: none.
  std::function<void(int64_t pos, int64_t n)> before_generate;
  // Prefill chunks also write every position's logits [n, V] here (--dump-logits); empty: none.
  std::function<Result<void>(std::span<const float> logits, int64_t n)> prompt_logits;
  BoundaryInput boundary;  // injection between tokens; empty: none
};

// Where the loop reads, between tokens and prefill chunks, what stops a turn from outside
// (actors/control.h): the interrupt epoch the turn was sent under, the gate's stop for this turn
// and the gate's lead. Atomics only: never a message per step.
struct TurnControl {
  const Control* control = nullptr;
  uint64_t epoch = 0;         // Control::interrupt_epoch when the turn was sent
  // The turn Control::gate_stop_turn names; 0: no gate follows this turn (one-shot generation,
  // where only the interrupt applies): never stopped by it, never waited for.
  uint64_t turn = 0;
  bool gate_may_stop = true;  // false: the gate's stop is reported, not obeyed
};

// One turn: append `input`, feed it, then (max_tokens > 0) generate.
struct TurnRequest {
  std::span<const int32_t> input;
  int64_t max_tokens = 0;
  EndIds end_ids = EndIds::kStopBefore;
  std::span<const int32_t> stop_ids;  // emitting one ends the turn (it stays in the context)
  // This turn's own sampler, seeded afresh from sampling->seed; null: the session's sampler goes
  // on where it was.
  const SamplingParams* sampling = nullptr;
  TurnControl control;  // control.control null: nothing stops the turn from outside
};

// One step's outcome and the gate's signals (DESIGN.md §3), measured on the distribution the
// token was drawn from (softmax(logits / T), T = 1 when greedy).
struct Step {
  int32_t id = 0;
  bool end = false;       // id is an end-of-turn id (with EndIds::kIgnore: never)
  int64_t position = 0;   // the context position the token takes
  int64_t index = 0;      // within its turn, from 0
  float ms_per_token = 0.0f;  // Engine::ms_per_token() when it was sampled
  float entropy = 0.0f;
  float top_prob = 0.0f;
  float eot_prob = 0.0f;
};

// What the sink makes of a token, before it joins the context.
enum class Verdict : uint8_t {
  kKeep,     // commit it and go on
  kLast,     // commit it and end the turn (StopReason::kSink)
  kRefuse,   // do not commit it; the turn ends (StopReason::kSink), the token is not counted
};

// Where a turn's tokens go: one call per sampled token, on the loop's thread, before the token
// is committed to the context. Must not block for long: the next step waits on it.
class TokenSink {
 public:
  virtual ~TokenSink() = default;
  virtual Verdict token(const Step& step) = 0;
  // The turn's input is in the context (position() ids, n of them new), before its prefill.
  virtual void appended(int64_t /*position*/, int64_t /*n*/) {}
  // n ids were injected at a token boundary (EngineOptions::boundary); the context now holds
  // `position` ids. Before they are fed.
  virtual void injected(int64_t /*position*/, int64_t /*n*/) {}
};

// How a turn ended. error is set when reason is kError.
struct TurnOutcome {
  StopReason reason = StopReason::kNoGenerate;
  int32_t stop_id = -1;    // the end id or stop id that ended it, else -1
  int64_t generated = 0;   // tokens committed (emitted) in this turn
  int64_t prefilled = 0;   // input ids fed by prefill in this turn
  double prefill_ms = 0.0, decode_ms = 0.0;
  std::optional<Error> error;
};

class Engine {
 public:
  // `forward` is shared so that whoever built it (and its device) lives as long as the engine.
  Engine(std::shared_ptr<Forward> forward, EngineOptions opts);

  // The per-token loop: appends and feeds req.input, then generates until a stop condition,
  // checked in this order before each step: the interrupt, the gate's stop, the turn's limit,
  // a full context; after each sampled token: end ids, the sink's verdict, stop ids. Allocates
  // nothing per token. The session's sampling and end ids are back in force afterwards.
  TurnOutcome run_turn(const TurnRequest& req, TokenSink& sink);

  // Adds ids to the context (pending until fed). Ids outside the vocabulary are an error and
  // nothing is added.
  Result<void> append(std::span<const int32_t> ids);
  // Feeds the pending ids in chunks; between chunks, stops early when stop() says so and keeps
  // the rest pending. Returns whether everything was fed.
  // hold: how many of the last pending ids stay pending.
  Result<bool> feed(const std::function<bool()>& stop, int64_t hold = 0);
  // Feeds what is pending (the previous token), then samples the next token, which joins the
  // context unless it is an end id (and stop at end). Needs a non-empty context.
  Result<Step> step();
  // Forgets the conversation; the sampler restarts from its seed.
  void reset();
  // The ids contexts open with from the next reset() on (EngineOptions::preamble). They must be
  // in the vocabulary (reset() checks).
  void set_preamble(std::vector<int32_t> ids) { opts_.preamble = std::move(ids); }
  // before_generate will not be shown the positions so far (an explicit recall used them).
  void skip_before_generate() { hooked_until_ = position(); }

  // Whether the context can take another token.
  bool full() const { return int64_t(context_.size()) >= opts_.max_positions; }
  int64_t position() const { return int64_t(context_.size()); }  // fed and pending
  int64_t fed() const { return forward_->position(); }
  const std::vector<int32_t>& context() const { return context_; }
  const EngineOptions& options() const { return opts_; }
  Forward& forward() const { return *forward_; }
  bool is_end(int32_t id) const;

  // Time spent in the forward pass (prefill and decode), over the session.
  double prefill_ms() const { return prefill_ms_; }
  double decode_ms() const { return decode_ms_; }
  int64_t prefilled() const { return prefilled_; }
  int64_t decoded() const { return decoded_; }
  // Recent decode cost (exponential average), for the gate.
  float ms_per_token() const { return ms_per_token_; }
  // The forward time of the last decode (one id fed), for the benches' per-token figures.
  double last_decode_ms() const { return last_decode_ms_; }
  // Tokens handed to sinks over the engine's life (never reset): the gate's lead counts them.
  int64_t emitted() const { return emitted_; }
  // Ids injected at token boundaries over the engine's life.
  int64_t injected() const { return injected_; }

 private:
  Result<void> feed_range(std::span<const int32_t> ids);
  void account_decode(double ms);
  float end_probability(std::span<const float> logits) const;
  bool interrupted(const TurnControl& c) const;
  void wait_for_gate(const TurnControl& c) const;
  // Takes what BoundaryInput has and appends it; false ends the turn (out says why).
  bool inject(TokenSink& sink, TurnOutcome& out);
  void generate(const TurnRequest& req, TokenSink& sink, TurnOutcome& out);
  // step() without committing: the caller decides with commit().
  Result<Step> sample_next();
  void commit(const Step& s);
  // Sampling for the steps until cleared (a request's own settings, e.g. --serve's GENERATE):
  // a sampler of its own, seeded from params.seed; nullptr goes back to the session's sampler,
  // whose random stream is left where it was.
  void set_request_sampling(const SamplingParams* params);
  // false: end ids are ordinary tokens (Step::end stays false) until set back to true.
  void set_stop_at_end(bool stop) { stop_at_end_ = stop; }

  std::shared_ptr<Forward> forward_;
  EngineOptions opts_;
  Sampler sampler_;
  std::optional<Sampler> request_sampler_;  // set_request_sampling
  bool stop_at_end_ = true;
  // Ids joining the context, for the samplers' repeat-penalty windows.
  void observe(std::span<const int32_t> ids);
  Sampler& active_sampler() { return request_sampler_ ? *request_sampler_ : sampler_; }
  const Sampler& active_sampler() const { return request_sampler_ ? *request_sampler_ : sampler_; }
  std::vector<float> logits_;    // [V] of the last fed position
  bool have_logits_ = false;
  int32_t argmax_id_ = -1;  // decode_argmax's answer for the last fed position, if it was that
  std::vector<int32_t> context_;  // every id of the conversation, fed or not
  double prefill_ms_ = 0.0, decode_ms_ = 0.0;
  int64_t prefilled_ = 0, decoded_ = 0;
  float ms_per_token_ = 0.0f;
  double last_decode_ms_ = 0.0;
  int64_t emitted_ = 0;
  int64_t injected_ = 0;
  std::vector<int32_t> inject_ids_;  // BoundaryInput::take's buffer, reserved at construction
  int64_t decode_at_ = -1;         // the position of the last committed generated token
  int64_t hooked_until_ = 0;       // before_generate has seen the positions below this
  std::vector<float> all_logits_;  // [chunk, V] for opts_.prompt_logits
};

}  // namespace infer::actors
