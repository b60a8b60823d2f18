// The --serve protocol's memory frames and the pipeline's memory operations, one to the other
// (docs/PROTOCOL.md §4.14-§4.18, actors/events.h MemoryOp): pure conversions.
#pragma once

#include "actors/events.h"
#include "protocol/serve_session.h"

namespace infer::cli {

actors::MemoryOp memory_op(const protocol::MemoryCommand& c);
// The answer frame: MEMORY_RECALLED, MEMORY_STORED, MEMORY_FORGOTTEN, MEMORY_LIST, or an ERROR
// (BAD_VALUE for an unknown episode, ENGINE for a failure) naming the request's opcode.
protocol::EngineMemoryReply memory_answer(const actors::MemoryReply& r);
protocol::EngineMemoryEvent memory_event(const actors::MemoryNotice& n);

}  // namespace infer::cli
