// Gate policy: act on a tool-call token, else listen when any enabled threshold says so, else act
// when interrupts are pending past their threshold. User input outranks tool output: a turn that
// should yield to both listens.
#include "actors/gate.h"

#include <algorithm>

namespace infer::actors {

Decision Gate::decide(const TokenEvent& s, const GateContext& ctx) const {
  const GateOptions& o = opts_;
  if (std::find(o.act_ids.begin(), o.act_ids.end(), s.id) != o.act_ids.end()) return Decision::kAct;
  if (o.max_entropy && s.entropy > *o.max_entropy) return Decision::kListen;
  if (o.min_top_prob && s.top_prob < *o.min_top_prob) return Decision::kListen;
  if (o.end_prob && s.eot_prob >= *o.end_prob) return Decision::kListen;
  if (ctx.pending_inputs > 0) {
    if (o.yield_to_input) return Decision::kListen;
    if (o.max_cost_ms && double(s.ms_per_token) * double(ctx.tokens_left) > *o.max_cost_ms) {
      return Decision::kListen;
    }
  }
  const int64_t interrupts =
      ctx.pending_interrupts +
      (o.pending_interrupts ? o.pending_interrupts->load(std::memory_order_relaxed) : 0);
  if (interrupts > 0) {
    if (o.act_on_interrupts && interrupts >= *o.act_on_interrupts) return Decision::kAct;
    if (o.interrupts_weigh_cost && o.max_cost_ms &&
        double(s.ms_per_token) * double(ctx.tokens_left) > *o.max_cost_ms) {
      return Decision::kAct;
    }
  }
  return Decision::kSpeak;
}

}  // namespace infer::actors
