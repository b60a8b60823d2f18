// Gate: the policy that decides, per generated token, whether to keep speaking, stop and
// listen, or act (DESIGN.md §3). Plain class, no CAF; the gate actor feeds it. Every threshold is
// off by default, so the default policy is "speak until end of turn or the token limit" and the
// output is the same as without a gate.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "actors/events.h"

namespace infer::actors {

struct GateOptions {
  std::optional<float> max_entropy;   // --gate-entropy: listen when a step's entropy (nats) is above
  std::optional<float> min_top_prob;  // listen when the top token's probability is below
  std::optional<float> end_prob;      // listen when P(end of turn) reaches this (an early ending)
  bool yield_to_input = false;        // listen as soon as user input is pending (urgency)
  std::optional<float> max_cost_ms;   // listen when input is pending and the turn's remaining
                                      // tokens would cost more than this (ms/token x tokens left)
  std::vector<int32_t> act_ids;       // tokens that start a tool call: act (none until tools land)
  // Pending interrupts (tools_vfs/interrupts.h InterruptSet::pending_counter), read with one
  // relaxed load per token; null: none. Urgency like pending input, answered by acting: the turn
  // stops so that the front end decides on them (ack, snooze, drop) and goes on.
  const std::atomic<int64_t>* pending_interrupts = nullptr;
  // Act once this many interrupts are pending (1: at the first one).
  std::optional<int64_t> act_on_interrupts;
  // With max_cost_ms: act when an interrupt is pending and the turn's remaining tokens would
  // cost more than max_cost_ms (a short answer finishes first, a long one yields).
  bool interrupts_weigh_cost = false;
};

// What the gate knows besides the step's own signals.
struct GateContext {
  int64_t pending_inputs = 0;  // inputs sent by the front end and not yet taken by a turn
  int64_t tokens_left = 0;     // of the turn's limit
  // Interrupts pending besides those GateOptions::pending_interrupts counts (tests, a front end
  // that counts its own).
  int64_t pending_interrupts = 0;
};

class Gate {
 public:
  explicit Gate(GateOptions opts) : opts_(std::move(opts)) {}
  Decision decide(const TokenEvent& step, const GateContext& ctx) const;
  const GateOptions& options() const { return opts_; }

 private:
  GateOptions opts_;
};

}  // namespace infer::actors
