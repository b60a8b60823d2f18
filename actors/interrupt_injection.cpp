// Interrupt injection: take the acked interrupts whose frames surely fit, write each as a tool
// response and encode it (markers as their ids, text never as a marker).
#include "actors/interrupt_injection.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/tool_format/tool_writer.h"

namespace infer::actors {

Result<FormatPieces> interrupt_response_pieces(const tools::AckedText& acked) {
  nlohmann::json result = {{"id", acked.source.id}, {"interrupt", acked.id}, {"text", acked.text}};
  if (acked.dropped_bytes > 0) result["dropped_bytes"] = acked.dropped_bytes;
  return response_pieces(tools::source_kind_name(acked.source.kind), result);
}

BoundaryInput interrupt_injection(
    tools::InterruptSet& set, const Tokenizer& tok,
    std::function<void(tools::InterruptId id, int64_t n_ids)> on_taken) {
  BoundaryInput b;
  b.ready = &set.acked_counter();
  b.take = [&set, &tok, on_taken = std::move(on_taken)](std::vector<int32_t>& ids, int64_t room) {
    // One at a time, so each is offered the room the ones before it left.
    for (size_t n = 0; n < kInterruptsPerBoundary; ++n) {
      const int64_t left = room - int64_t(ids.size());
      const size_t max_bytes = left > kInterruptFrameIds ? size_t(left - kInterruptFrameIds) : 0;
      const std::vector<tools::AckedText> taken = set.take_acked(max_bytes, 1);
      if (taken.empty()) break;
      const tools::AckedText& a = taken[0];
      Result<FormatPieces> pieces = interrupt_response_pieces(a);
      Result<std::vector<int32_t>> framed =
          pieces ? encode_pieces(tok, *pieces) : Result<std::vector<int32_t>>(pieces.error());
      if (!framed) {
        // Not reachable with Gemma 4's tokenizer (it has the markers); said in the text rather
        // than lost silently.
        framed = encode_unmarked(
            tok, "[interrupt " + std::to_string(a.id) + ": " + framed.error().message + "]");
      }
      ids.insert(ids.end(), framed->begin(), framed->end());
      if (on_taken) on_taken(a.id, int64_t(framed->size()));
    }
    if (!ids.empty()) return Injection::kIds;
    return set.acked_count() > 0 ? Injection::kNoRoom : Injection::kNothing;
  };
  return b;
}

}  // namespace infer::actors
