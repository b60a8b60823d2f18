// Pipeline: the actor system of one conversation (DESIGN.md §3) behind a plain API, so that
// front ends (REPL, pipe, --serve) and tests use it without CAF headers. It spawns io ->
// tokenizer -> stream (detached) -> gate -> tokenizer -> io, plus consolidation, tools (detached)
// and, with memory, recall. Events come back through the FrontEnd on io's thread.
#pragma once

#include <cstdint>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "actors/engine.h"
#include "actors/front_end.h"
#include "actors/gate.h"
#include "actors/memory_link.h"
#include "actors/tool_registry.h"
#include "actors/tracer.h"
#include "model/forward.h"
#include "model/tokenizer/tokenizer.h"

namespace infer::actors {

struct PipelineOptions {
  EngineOptions engine;
  GateOptions gate;
  double consolidate_after_s = 6.0;      // --consolidate-after
  const Tokenizer* tokenizer = nullptr;  // null: ids only; else must outlive the pipeline
  Tracer* tracer = nullptr;              // null: no tracing; else must outlive the pipeline
  int scheduler_threads = 0;             // CAF workers for the scheduled stages; 0: 2
  // Episodic memory (DESIGN.md §5): evicted and quiet rows become episodes, each generating
  // turn recalls into the ring's recall tier. Null: none.
  std::shared_ptr<MemoryLink> memory;
  // Tool calls (docs/TOOLS.md, Running calls): with a tokenizer that has Gemma 4's tool markers
  // every turn runs through the call loop; tools.builtin null: calls are reported, not run.
  ToolSetup tools;
};

// A generating turn's settings besides its limit.
struct TurnOptions {
  // This turn's own sampling settings, seeded afresh; null: the session's sampler goes on.
  const SamplingParams* sampling = nullptr;
  EndIds end_ids = EndIds::kStopBefore;  // what the model's end ids do
  bool gate_may_stop = true;  // false: the gate's listen/act decisions are reported, not obeyed
  std::vector<int32_t> stop_ids;  // emitting one ends the turn (it stays in the context)
};

class Pipeline {
 public:
  // `front_end` must outlive the pipeline.
  Pipeline(std::shared_ptr<Forward> forward, PipelineOptions opts, FrontEnd& front_end);
  // Stops any generation, then every actor; returns when all have ended.
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Appends text (encoded as raw text: added tokens such as <|turn> match) and then ids to the
  // context; with generate, a turn of at most max_tokens follows, as `turn` says. Returns the
  // turn's number (from 1), which its events carry. Callable from any thread.
  uint64_t send(std::string text, std::vector<int32_t> ids, bool generate, int64_t max_tokens,
                TurnOptions turn = {});
  // Stops the generation in progress, and any turn already sent, within one token; what was
  // generated stays in the context. Async-signal-safe (one atomic increment).
  void interrupt();
  // Empties the context (after the turns already sent). FrontEnd::reset_done follows. With
  // `preamble`, that context and every later one open with these ids instead.
  void reset(std::optional<std::vector<int32_t>> preamble = std::nullopt);
  // Episodic memory on request, after the turns already sent; FrontEnd::memory_reply answers it
  // with op.ticket (the caller's numbering). Without memory the reply is an error. While
  // memory is on, FrontEnd::memory_event reports every change to the store.
  void memory(MemoryOp op);
  // The session's figures after the turns already sent (waits for them).
  Result<PipelineStats> stats(bool with_context = false);

  // Tools. A client tool is run by the front end: a call to it arrives as a ToolEvent of kind
  // kClientCall and is answered by tool_result(call_id, JSON text); without an answer within
  // ToolSetup::client_timeout the model gets an error response. Declaring needs tools on
  // (kUnsupported otherwise). The declarations go into the system turn of contexts opened after
  // they are made (the front end writes it: tool_declarations()).
  Result<void> declare_client_tool(ToolDeclaration tool);
  // Replaces every client tool at once (ToolRegistry::replace_client); [] withdraws them.
  Result<void> set_client_tools(std::vector<ToolDeclaration> tools);
  void tool_result(uint64_t call_id, std::string result_json);
  // Built-in tools (when on) and client tools, in the order the system turn lists them.
  std::vector<ToolDeclaration> tool_declarations() const;
  bool tools_enabled() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace infer::actors
