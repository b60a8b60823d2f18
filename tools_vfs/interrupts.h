// InterruptSet: the interrupt state machine of issue 30 item 6 (DESIGN.md §8, docs/TOOLS.md
// "Interrupts"). A source (a PTY, a finished subshell, a client event) raises at most one live
// interrupt; a burst from it coalesces into that one. A front end decides: ack (the decode
// thread injects it at the next token boundary), snooze (until the turn ends or a delay, then
// pending again) or drop. Every transition is an event with a sequence number. Thread-safe: PTY
// drain threads raise, the decode thread takes acked text, front ends act; the counts the engine
// and the gate read per token are atomics. No CAF, no tokenizer: text only.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "tools_vfs/head_tail_buffer.h"

namespace infer::tools {

using InterruptId = uint64_t;

enum class SourceKind : uint8_t { kPty, kSubshell, kClient };
const char* source_kind_name(SourceKind k);  // "pty", "subshell", "client"

// Who raised it; one live interrupt per source.
struct InterruptSource {
  SourceKind kind = SourceKind::kPty;
  uint64_t id = 0;  // the PTY id, the subshell run's number, the client's event source
  auto operator<=>(const InterruptSource&) const = default;
};

enum class InterruptState : uint8_t {
  kPending,   // raised, waiting for a decision
  kAcked,     // to be injected at the next token boundary
  kSnoozed,   // pending again when the turn ends or its delay passes
  kInjected,  // taken by the decode thread: done
  kDropped,   // done without injection
};
const char* interrupt_state_name(InterruptState s);

// A transition. raised: new -> pending; acked, snoozed, dropped: a front end's decision; woke:
// snoozed -> pending (turn end or delay); injected: acked -> taken at a token boundary.
enum class InterruptEventKind : uint8_t { kRaised, kAcked, kSnoozed, kWoke, kDropped, kInjected };
const char* interrupt_event_name(InterruptEventKind k);

struct InterruptEvent {
  uint64_t seq = 0;  // from 1, one more per event: a gap would mean a lost event (there is none)
  InterruptEventKind kind = InterruptEventKind::kRaised;
  InterruptId id = 0;
  InterruptSource source;
  uint64_t text_bytes = 0;     // text held, partial line included (injected: the bytes taken)
  uint64_t dropped_bytes = 0;  // coalesced output cut from its middle to stay within the cap
  uint64_t raised_bytes = 0;   // all its raises brought (kept and cut; the partial line aside)
  uint64_t bursts = 0;         // raises coalesced into it, the first included
  std::chrono::steady_clock::time_point at;  // when, by the set's clock
};

// One interrupt as a front end lists it.
struct InterruptInfo {
  InterruptId id = 0;
  InterruptSource source;
  InterruptState state = InterruptState::kPending;
  uint64_t text_bytes = 0;  // held, partial line included
  uint64_t dropped_bytes = 0;
  uint64_t bursts = 0;
  std::string preview;          // the first line of its text, cut at 80 bytes
  bool until_turn_end = false;  // snoozed until the turn ends
  std::optional<std::chrono::steady_clock::time_point> wake_at;  // snoozed for a delay
};

// What the decode thread takes: the acked interrupts, oldest ack first, now injected.
struct AckedText {
  InterruptId id = 0;
  InterruptSource source;
  std::string text;  // coalesced output (head, "[... N bytes dropped ...]", tail) + partial line
  uint64_t dropped_bytes = 0;
  uint64_t raised_bytes = 0;  // as InterruptEvent::raised_bytes
};

struct InterruptLimits {
  size_t max_text_bytes = 8192;  // per interrupt: a quarter for the head, the rest for the tail
  size_t max_live = 64;          // interrupts not yet injected or dropped (one per source)
  size_t event_capacity = 1024;  // events not yet read by take_events
};

class InterruptSet {
 public:
  using Clock = std::chrono::steady_clock;
  // `now` is the clock snoozes are measured by (tests inject one); empty: Clock::now.
  explicit InterruptSet(InterruptLimits limits = {}, std::function<Clock::time_point()> now = {});

  // New output from a source: coalesced into its live interrupt (pending, snoozed or acked:
  // acked text still waiting for a boundary is injected with it), else a new pending one.
  // `partial_line` replaces the source's unfinished last line (a prompt), kept apart so that
  // the next burst's finished line does not repeat it. Returns the interrupt's id. Refused
  // (kInvalidArgument) when max_live interrupts are live and this source has none; the caller
  // may retry later (the PTY adapter keeps its offset). When the event queue is full the new
  // interrupt is held unannounced (not counted, not listed, still coalescing) and raised once
  // take_events makes room, so its event is late, never lost.
  Result<InterruptId> raise(InterruptSource source, std::string_view text,
                            std::string_view partial_line = {});

  // A front end's decisions. An unknown or finished id is kNotFound; a decision the state does
  // not allow (ack of an acked one, snooze of an acked one) is kInvalidArgument; so is any
  // decision while the event queue is full (read the events first), and nothing changes.
  Result<void> ack(InterruptId id);   // pending | snoozed -> acked
  Result<void> drop(InterruptId id);  // pending | snoozed | acked -> dropped
  // pending | snoozed -> snoozed until the turn ends (delay empty) or for `delay` (> 0).
  Result<void> snooze(InterruptId id, std::optional<std::chrono::milliseconds> delay = {});

  // Wakes every interrupt snoozed until the turn's end.
  void end_turn();
  // Wakes the interrupts whose snooze delay has passed by the clock; returns how many. Every
  // other call does this too; run_timer keeps the time when nothing else calls.
  size_t wake_due();
  // A front end's timer thread: sleeps until the earliest snooze delay passes (waking those
  // interrupts) or a new event, again and again, until stop_timer(). On the real clock.
  void run_timer();
  // Ends run_timer (now, and at once for any later call).
  void stop_timer();

  // The decode thread, at a token boundary: the acked interrupts, oldest ack first, whose text
  // fits in `max_bytes` together, at most `max_count` of them (the first that does not fit
  // stops the take, so order is kept); each becomes injected (an event). Empty when nothing is
  // acked or nothing fits.
  std::vector<AckedText> take_acked(size_t max_bytes = SIZE_MAX, size_t max_count = SIZE_MAX);

  // One relaxed atomic load each: what the engine (acked) and the gate (pending) read per token.
  int64_t acked_count() const { return acked_.load(std::memory_order_relaxed); }
  int64_t pending_count() const { return pending_.load(std::memory_order_relaxed); }
  const std::atomic<int64_t>& acked_counter() const { return acked_; }
  const std::atomic<int64_t>& pending_counter() const { return pending_; }

  // The events since the last take, in order; waits up to `timeout` for one when none is queued.
  std::vector<InterruptEvent> take_events(std::chrono::milliseconds timeout = {});
  // Live interrupts (pending, snoozed, acked) by id.
  std::vector<InterruptInfo> list() const;
  // The text an interrupt holds now (what ack would inject), for a front end to show.
  Result<std::string> text(InterruptId id) const;
  // The last sequence number given out.
  uint64_t last_seq() const;

 private:
  struct Entry {
    InterruptId id = 0;
    InterruptSource source;
    InterruptState state = InterruptState::kPending;
    HeadTailBuffer text;
    std::string partial;
    uint64_t bursts = 0;
    uint64_t ack_order = 0;  // acks are injected in the order they came
    bool until_turn_end = false;
    std::optional<Clock::time_point> wake_at;
    bool announced = false;  // its raised event is queued (held back while the queue is full)
  };

  // mu_ held for all of these.
  bool has_room(size_t n) const;  // n more events fit beside the reservations for injections
  // text_bytes: what the event reports as held; empty: held_bytes(e).
  void emit(InterruptEventKind kind, const Entry& e, std::optional<uint64_t> text_bytes = {});
  static uint64_t held_bytes(const Entry& e);  // kept text and the partial line
  void set_state(Entry& e, InterruptState to);  // keeps the atomic counts
  Result<Entry*> find_live(InterruptId id, const char* action);
  size_t wake_due_locked(Clock::time_point now);
  void announce_held();  // raises what a full queue held back, oldest first, while room lasts
  std::optional<Clock::time_point> earliest_wake() const;
  static std::string entry_text(const Entry& e);

  InterruptLimits limits_;
  std::function<Clock::time_point()> now_;
  mutable std::mutex mu_;
  std::condition_variable changed_;  // an event was queued (a snooze too), or stop_timer
  bool timer_stopped_ = false;
  std::map<InterruptId, Entry> live_;
  std::map<InterruptSource, InterruptId> by_source_;
  std::deque<InterruptEvent> events_;
  uint64_t next_seq_ = 1;
  InterruptId next_id_ = 1;
  uint64_t next_ack_ = 1;
  std::atomic<int64_t> acked_{0};    // acked, not yet taken; each reserves its injected event
  std::atomic<int64_t> pending_{0};  // pending (not snoozed, not acked)
};

}  // namespace infer::tools
