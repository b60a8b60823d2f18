// tokenizer: text in -> ids to the stream (in order with commands); ids out -> text, through one
// StreamDecoder for the session, so a character split over tokens (or turns) comes out whole.
#include <optional>
#include <utility>

#include "actors/stages.h"

namespace infer::actors {
namespace {

struct TokenizerState {
  const Tokenizer* tokenizer = nullptr;
  std::optional<StreamDecoder> decoder;
  WiringPtr wiring;
  Tracer* tracer = nullptr;
};

using Self = tokenizer_actor::stateful_pointer<TokenizerState>;

tokenizer_actor::behavior_type tokenizer_fn(Self self, const Tokenizer* tokenizer,
                                            WiringPtr wiring, Tracer* tracer) {
  TokenizerState& st = self->state;
  st.tokenizer = tokenizer;
  if (tokenizer != nullptr) st.decoder.emplace(*tokenizer);
  st.wiring = std::move(wiring);
  st.tracer = tracer;
  return {
      [=](InputMsg& in) {
        TokenizerState& s = self->state;
        TraceScope scope(s.tracer, "tokenizer", "input", int64_t(in.turn));
        StreamInput out{in.turn, {}, in.generate, in.max_tokens, in.epoch, in.sampling};
        if (!in.text.empty()) {
          if (s.tokenizer == nullptr) {
            // The turn still reaches the stream, so that it ends like any other.
            self->send(s.wiring->io,
                       failure(make_error(ErrorCode::kInvalidArgument,
                                          "text input needs the model's tokenizer.json")));
            out.generate = false;
            self->send(s.wiring->stream, std::move(out));
            return;
          }
          out.ids = s.tokenizer->encode(in.text, false);
        }
        out.ids.insert(out.ids.end(), in.ids.begin(), in.ids.end());
        self->send(s.wiring->stream, std::move(out));
      },
      [=](MemoryOp& op) {  // a recall's query is text like APPEND_TEXT's (no template)
        TokenizerState& s = self->state;
        if (!op.text.empty()) {
          if (s.tokenizer == nullptr) {
            op.refused = "a text query needs the model's tokenizer.json";
          } else {
            op.ids = s.tokenizer->encode(op.text, false);
          }
        }
        return self->delegate(s.wiring->stream, std::move(op));
      },
      [=](stats_atom a, bool with_context) {
        return self->delegate(self->state.wiring->stream, a, with_context);
      },
      [=](SetPreamble& p) { self->send(self->state.wiring->stream, std::move(p)); },
      [=](reset_atom a) { return self->delegate(self->state.wiring->stream, a); },
      [=](TokenEvent& t) {
        TokenizerState& s = self->state;
        TraceScope scope(s.tracer, "tokenizer", "token", t.step);
        // A tool call's tokens are not text for the user; the call comes as a ToolEvent.
        if (s.decoder && !t.tool_call) s.decoder->push(t.id, t.text);
        self->send(s.wiring->io, std::move(t));
      },
      [=](ToolEvent& e) { self->send(self->state.wiring->io, std::move(e)); },
      [=](TurnEnd& e) {
        TokenizerState& s = self->state;
        TraceScope scope(s.tracer, "tokenizer", "turn_end", int64_t(e.turn));
        if (s.decoder) s.decoder->flush(e.tail_text);
        self->send(s.wiring->io, std::move(e));
      },
      [=](const InputAppended& a) { self->send(self->state.wiring->io, a); },
      [=](ResetDone r) {  // the reset's last hop: after every token before it was decoded
        TokenizerState& s = self->state;
        if (s.decoder) s.decoder->reset();
        return r;
      },
      [=](Failure& f) { self->send(self->state.wiring->io, std::move(f)); },
  };
}

}  // namespace

tokenizer_actor spawn_tokenizer(caf::actor_system& sys, const Tokenizer* tokenizer,
                                WiringPtr wiring, Tracer* tracer) {
  return sys.spawn(tokenizer_fn, tokenizer, std::move(wiring), tracer);
}

}  // namespace infer::actors
