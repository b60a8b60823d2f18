// The REPL's PTY and interrupt commands (docs/TOOLS.md "Interrupts", issue 30 item 8): /pty open
// CMD, /pty (list), /pty N (attach), /pty N TEXT, /pty close N, /interrupts, /ack N,
// /snooze N [seconds], /drop N. PTYs run in the --tools ROOT; their new text raises interrupts
// (one per PTY, coalesced) that the user acks (injected into the model's turn), snoozes or drops.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "actors/engine.h"
#include "actors/tracer.h"
#include "base/result.h"
#include "model/tokenizer/tokenizer.h"
#include "tools_vfs/interrupt_sources.h"
#include "tools_vfs/interrupts.h"
#include "tools_vfs/pty_set.h"

namespace infer::cli {

// What a command asks of the REPL after it ran.
struct ToolCommandResult {
  bool ok = true;              // false: refused or failed (the message is on stderr)
  bool continue_turn = false;  // /ack: let the model go on with the injected text now
};

// Where attach reads keys and writes output (a terminal: raw mode while attached).
struct AttachIo {
  int in_fd = 0;
  int out_fd = 1;
};

class ReplTools {
 public:
  // PTYs in ROOT (an existing directory), each raising interrupts; a timer thread wakes snoozes.
  static Result<std::unique_ptr<ReplTools>> open(const std::string& root);
  ~ReplTools();
  ReplTools(const ReplTools&) = delete;
  ReplTools& operator=(const ReplTools&) = delete;

  // The engine's injection and the gate's urgency; must be wired before the pipeline starts,
  // and this object must outlive it.
  actors::BoundaryInput injection(const Tokenizer& tok);
  const std::atomic<int64_t>& pending_counter() const { return interrupts_.pending_counter(); }

  // Runs one command line (starting with /pty, /ack, /snooze, /drop or /interrupts), printing
  // on `out` (errors on stderr).
  ToolCommandResult run(std::string_view line, std::FILE* out, AttachIo io = {});
  // Before a prompt: one line per interrupt event since the last call, and with a tracer
  // (--trace) one instant span each on the "interrupts" track (arg: the interrupt's id).
  void report(std::FILE* out);
  void set_tracer(actors::Tracer* tracer) { tracer_ = tracer; }
  // After a turn: snoozes until the turn's end are over.
  void turn_ended() { interrupts_.end_turn(); }

  tools::InterruptSet& interrupts() { return interrupts_; }
  tools::PtySet& ptys() { return *ptys_; }

 private:
  ReplTools() : adapter_(interrupts_) {}
  ToolCommandResult pty_command(std::string_view args, std::FILE* out, AttachIo io);
  ToolCommandResult attach(tools::PtyId id, std::FILE* out, AttachIo io);
  void list_interrupts(std::FILE* out);

  actors::Tracer* tracer_ = nullptr;
  tools::InterruptSet interrupts_;
  tools::PtyInterrupts adapter_;
  std::unique_ptr<tools::PtySet> ptys_;  // after the adapter: its drain thread ends first
  std::thread timer_;  // InterruptSet::run_timer, stopped and joined by the destructor
};

}  // namespace infer::cli
