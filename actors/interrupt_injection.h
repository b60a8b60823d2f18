// Acked interrupts (tools_vfs/interrupts.h) as the ids the engine injects at a token boundary
// (EngineOptions::boundary). Each is framed as a Gemma 4 tool response the model did not ask
// for, named after its source: <|tool_response>response:pty{id:2,interrupt:7,text:<|"|>...<|"|>}
// <tool_response|> (docs/TOOLS.md "Interrupts" says why this framing).
#pragma once

#include <cstdint>
#include <functional>

#include "actors/engine.h"
#include "base/result.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tool_format/format_pieces.h"
#include "tools_vfs/interrupts.h"

namespace infer::actors {

// The most ids the frame adds around an interrupt's text (markers, name, keys, numbers): the
// text takes at most one id a byte, so text bytes + this bounds the ids.
inline constexpr int64_t kInterruptFrameIds = 96;
// Interrupts injected at one boundary at most; the rest wait for the next one.
inline constexpr size_t kInterruptsPerBoundary = 8;

// response:SOURCE{id:SOURCE_ID,interrupt:ID,text:TEXT} (+ dropped_bytes when output was cut).
Result<FormatPieces> interrupt_response_pieces(const tools::AckedText& acked);

// The BoundaryInput that takes `set`'s acked interrupts, oldest ack first, and encodes them with
// `tok`. Both must outlive the engine. An interrupt is taken only when its text bytes plus
// kInterruptFrameIds fit in the room left; one that does not stays acked (with those after it)
// and, when nothing was taken, the turn ends (context full).
// on_taken (may be empty) hears each taken interrupt's id and its ids' count, in order, on the
// loop's thread before the ids join the context (--serve's TOOL_EVENT `injected` says both).
BoundaryInput interrupt_injection(
    tools::InterruptSet& set, const Tokenizer& tok,
    std::function<void(tools::InterruptId id, int64_t n_ids)> on_taken = {});

}  // namespace infer::actors
