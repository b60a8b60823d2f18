// One spawn function per stage (DESIGN.md §3); Pipeline spawns them all, then fills the Wiring
// they share. Each lives in <stage>_actor.cpp: a state struct and short handlers over a plain
// class (Engine, Gate, Tokenizer, QuietTracker).
#pragma once

#include <chrono>
#include <memory>

#include "actors/control.h"
#include "actors/engine.h"
#include "actors/front_end.h"
#include "actors/gate.h"
#include "actors/messages.h"
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
stream_actor spawn_stream(caf::actor_system& sys, std::shared_ptr<Engine> engine,
                          std::shared_ptr<Control> control, WiringPtr wiring, Tracer* tracer);
gate_actor spawn_gate(caf::actor_system& sys, Gate gate, std::shared_ptr<Control> control,
                      WiringPtr wiring, Tracer* tracer);
consolidation_actor spawn_consolidation(caf::actor_system& sys,
                                        std::chrono::milliseconds debounce, WiringPtr wiring,
                                        Tracer* tracer);

}  // namespace infer::actors
