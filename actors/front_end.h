// FrontEnd: what the io actor drives (DESIGN.md §3, io). The REPL (tty), the pipe mode and the
// --serve protocol each implement it; the io actor calls it on its own thread, one call at a
// time, in the order the events happened. Input goes the other way through Pipeline.
#pragma once

#include "actors/events.h"

namespace infer::actors {

class FrontEnd {
 public:
  virtual ~FrontEnd() = default;
  // A generated token: its id, its text (possibly empty), its signals and the gate's decision.
  virtual void token(const TokenEvent& t) = 0;
  // A turn's input is in the context, before its prefill.
  virtual void appended(const InputAppended&) {}
  // A turn is over; every token of it has been delivered.
  virtual void turn_end(const TurnEnd& e) = 0;
  virtual void quiet(const QuietSpan&) {}
  virtual void reset_done() {}
  virtual void error(const ErrorEvent& e) = 0;
  // Episodic memory: the answer to Pipeline::memory(), and what happened to episodes.
  virtual void memory_reply(const MemoryReply&) {}
  virtual void memory_event(const MemoryNotice&) {}
  // A tool call the model wrote, its result or its error; kClientCall asks the front end to run
  // one of its own tools and answer with Pipeline::tool_result.
  virtual void tool_event(const ToolEvent&) {}
};

}  // namespace infer::actors
