// One spawn function per stage (DESIGN.md §3); Pipeline spawns them all, then fills the Wiring
// they share. Each lives in <stage>_actor.cpp: a state struct and short handlers over a plain
// class (Engine, Gate, Tokenizer, QuietTracker).
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "actors/control.h"
#include "actors/engine.h"
#include "actors/front_end.h"
#include "actors/gate.h"
#include "actors/messages.h"
#include "actors/tool_loop.h"
#include "actors/tool_registry.h"
#include "model/kv_ring_api.h"
#include "actors/tracer.h"
#include "model/tokenizer/tokenizer.h"

namespace infer::actors {

using WiringPtr = std::shared_ptr<const Wiring>;

// Detached: the front end may block on its output.
io_actor spawn_io(caf::actor_system& sys, FrontEnd* front_end, WiringPtr wiring, Tracer* tracer);
// tokenizer may be null: ids only, text input is an error and tokens carry no text.
tokenizer_actor spawn_tokenizer(caf::actor_system& sys, const Tokenizer* tokenizer,
                                WiringPtr wiring, Tracer* tracer);
// Detached: runs prefill and the decode loop on its own thread.
// link: episodic memory (null: none); the stream sets the ring's eviction sink and reads a
// turn's input rows for recall. tool_loop: the call loop's settings (nullopt: no tokenizer with
// tool markers, so calls are not even parsed).
stream_actor spawn_stream(caf::actor_system& sys, std::shared_ptr<Engine> engine,
                          std::shared_ptr<Control> control, WiringPtr wiring, Tracer* tracer,
                          std::shared_ptr<MemoryLink> link,
                          std::optional<ToolLoopOptions> tool_loop);
// Detached: a built-in call (a command) may take seconds. registry: the client tools.
tools_actor spawn_tools(caf::actor_system& sys, ToolSetup setup,
                        std::shared_ptr<const ToolRegistry> registry, WiringPtr wiring,
                        Tracer* tracer);
gate_actor spawn_gate(caf::actor_system& sys, Gate gate, std::shared_ptr<Control> control,
                      WiringPtr wiring, Tracer* tracer);
// link: episodic memory (null: none); consolidation writes the rows the stream hands over.
consolidation_actor spawn_consolidation(caf::actor_system& sys,
                                        std::chrono::milliseconds debounce, WiringPtr wiring,
                                        Tracer* tracer, std::shared_ptr<MemoryLink> link);
recall_actor spawn_recall(caf::actor_system& sys, std::shared_ptr<MemoryLink> link,
                          Tracer* tracer);
// Engine::before_generate with memory (on the decode thread): reads the rows of the input
// [pos, pos + n) still in the ring, asks recall, waits for it at most link.recall_wait and places
// what it recalled in the ring's recall tier.
void recall_for_turn(MemoryLink& link, const Wiring& wiring, Forward& forward, Tracer* tracer,
                     int64_t pos, int64_t n);
// A MemoryOp, on the stream's thread between turns (actors/memory_ops.cpp). link null: refused.
MemoryReply run_memory_op(MemoryLink* link, Engine& engine, const MemoryOp& op, Tracer* tracer);

}  // namespace infer::actors
