// InterruptSet: one mutex guards the entries and the event queue; the two counts the decode loop
// and the gate read are atomics written under it. Room in the queue is reserved for the injected
// event of every acked interrupt, so the decode thread never waits for a reader.
#include "tools_vfs/interrupts.h"

#include <algorithm>

namespace infer::tools {
namespace {

std::string id_text(InterruptId id) { return "interrupt " + std::to_string(id); }

}  // namespace

const char* source_kind_name(SourceKind k) {
  switch (k) {
    case SourceKind::kPty:
      return "pty";
    case SourceKind::kSubshell:
      return "subshell";
    case SourceKind::kClient:
      return "client";
  }
  return "?";
}

const char* interrupt_state_name(InterruptState s) {
  switch (s) {
    case InterruptState::kPending:
      return "pending";
    case InterruptState::kAcked:
      return "acked";
    case InterruptState::kSnoozed:
      return "snoozed";
    case InterruptState::kInjected:
      return "injected";
    case InterruptState::kDropped:
      return "dropped";
  }
  return "?";
}

const char* interrupt_event_name(InterruptEventKind k) {
  switch (k) {
    case InterruptEventKind::kRaised:
      return "raised";
    case InterruptEventKind::kAcked:
      return "acked";
    case InterruptEventKind::kSnoozed:
      return "snoozed";
    case InterruptEventKind::kWoke:
      return "woke";
    case InterruptEventKind::kDropped:
      return "dropped";
    case InterruptEventKind::kInjected:
      return "injected";
  }
  return "?";
}

InterruptSet::InterruptSet(InterruptLimits limits, std::function<Clock::time_point()> now)
    : limits_(limits), now_(now ? std::move(now) : [] { return Clock::now(); }) {
  limits_.max_text_bytes = std::max<size_t>(limits_.max_text_bytes, 16);
  limits_.max_live = std::max<size_t>(limits_.max_live, 1);
  // An ack needs two slots (its event and its injection's), so fewer could refuse every ack.
  limits_.event_capacity = std::max<size_t>(limits_.event_capacity, 2);
}

bool InterruptSet::has_room(size_t n) const {
  return events_.size() + size_t(acked_.load(std::memory_order_relaxed)) + n <=
         limits_.event_capacity;
}

uint64_t InterruptSet::held_bytes(const Entry& e) {
  return e.text.total_bytes() - e.text.dropped_bytes() + e.partial.size();
}

void InterruptSet::emit(InterruptEventKind kind, const Entry& e,
                        std::optional<uint64_t> text_bytes) {
  InterruptEvent ev;
  ev.seq = next_seq_++;
  ev.kind = kind;
  ev.id = e.id;
  ev.source = e.source;
  ev.text_bytes = text_bytes ? *text_bytes : held_bytes(e);
  ev.dropped_bytes = e.text.dropped_bytes();
  ev.raised_bytes = e.text.total_bytes();
  ev.bursts = e.bursts;
  ev.at = now_();
  events_.push_back(ev);
  changed_.notify_all();
}

void InterruptSet::set_state(Entry& e, InterruptState to) {
  if (e.announced) {
    if (e.state == InterruptState::kPending) pending_.fetch_sub(1, std::memory_order_relaxed);
    if (e.state == InterruptState::kAcked) acked_.fetch_sub(1, std::memory_order_relaxed);
    if (to == InterruptState::kPending) pending_.fetch_add(1, std::memory_order_relaxed);
    if (to == InterruptState::kAcked) acked_.fetch_add(1, std::memory_order_relaxed);
  }
  e.state = to;
  if (to != InterruptState::kSnoozed) {
    e.until_turn_end = false;
    e.wake_at.reset();
  }
}

std::string InterruptSet::entry_text(const Entry& e) { return e.text.text() + e.partial; }

Result<InterruptId> InterruptSet::raise(InterruptSource source, std::string_view text,
                                        std::string_view partial_line) {
  std::lock_guard lock(mu_);
  wake_due_locked(now_());
  Entry* e = nullptr;
  if (auto it = by_source_.find(source); it != by_source_.end()) {
    e = &live_.at(it->second);
  } else {
    if (live_.size() >= limits_.max_live) {
      return make_error(
          ErrorCode::kInvalidArgument,
          std::string("too many live interrupts (") + std::to_string(limits_.max_live) +
              "): " + source_kind_name(source.kind) + " " + std::to_string(source.id) +
              " cannot raise one until one is acked, injected or dropped");
    }
    const size_t head = limits_.max_text_bytes / 4;
    Entry fresh;
    fresh.id = next_id_++;
    fresh.source = source;
    fresh.text = HeadTailBuffer(head, limits_.max_text_bytes - head);
    e = &live_.emplace(fresh.id, std::move(fresh)).first->second;
    by_source_.emplace(source, e->id);
  }
  e->text.append(text);
  // A prompt is one line; the cap keeps a redrawn progress line from growing the entry.
  e->partial.assign(partial_line.substr(0, limits_.max_text_bytes / 4));
  ++e->bursts;
  if (!e->announced && has_room(1)) {
    e->announced = true;
    e->state = InterruptState::kPending;
    pending_.fetch_add(1, std::memory_order_relaxed);
    emit(InterruptEventKind::kRaised, *e);
  }
  return e->id;
}

Result<InterruptSet::Entry*> InterruptSet::find_live(InterruptId id, const char* action) {
  auto it = live_.find(id);
  if (it == live_.end() || !it->second.announced) {
    return make_error(ErrorCode::kNotFound,
                      std::string("cannot ") + action + " " + id_text(id) +
                          ": no such interrupt (it may have been injected or dropped already)");
  }
  return &it->second;
}

Result<void> InterruptSet::ack(InterruptId id) {
  std::lock_guard lock(mu_);
  wake_due_locked(now_());
  INFER_TRY(Entry * e, find_live(id, "ack"));
  if (e->state == InterruptState::kAcked) {
    return make_error(ErrorCode::kInvalidArgument, id_text(id) + " is already acked");
  }
  if (!has_room(2)) {  // its event now, and its injected event later (reserved)
    return make_error(ErrorCode::kInvalidArgument,
                      "cannot ack " + id_text(id) + ": the event queue is full (" +
                          std::to_string(limits_.event_capacity) + "); read the events first");
  }
  e->ack_order = next_ack_++;
  set_state(*e, InterruptState::kAcked);
  emit(InterruptEventKind::kAcked, *e);
  return Ok{};
}

Result<void> InterruptSet::drop(InterruptId id) {
  std::lock_guard lock(mu_);
  wake_due_locked(now_());
  INFER_TRY(Entry * e, find_live(id, "drop"));
  // Dropping an acked one frees its reservation first, so a full queue still takes its event.
  if (!has_room(e->state == InterruptState::kAcked ? 0 : 1)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "cannot drop " + id_text(id) + ": the event queue is full (" +
                          std::to_string(limits_.event_capacity) + "); read the events first");
  }
  set_state(*e, InterruptState::kDropped);
  emit(InterruptEventKind::kDropped, *e);
  by_source_.erase(e->source);
  live_.erase(id);
  return Ok{};
}

Result<void> InterruptSet::snooze(InterruptId id, std::optional<std::chrono::milliseconds> delay) {
  if (delay && delay->count() <= 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      "cannot snooze " + id_text(id) + " for " + std::to_string(delay->count()) +
                          " ms: a delay must be positive (none: until the turn ends)");
  }
  std::lock_guard lock(mu_);
  const Clock::time_point now = now_();
  wake_due_locked(now);
  INFER_TRY(Entry * e, find_live(id, "snooze"));
  if (e->state == InterruptState::kAcked) {
    return make_error(ErrorCode::kInvalidArgument,
                      id_text(id) + " is acked: it is injected at the next token boundary");
  }
  if (!has_room(1)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "cannot snooze " + id_text(id) + ": the event queue is full (" +
                          std::to_string(limits_.event_capacity) + "); read the events first");
  }
  set_state(*e, InterruptState::kSnoozed);
  e->until_turn_end = !delay.has_value();
  if (delay) e->wake_at = now + *delay;
  emit(InterruptEventKind::kSnoozed, *e);
  return Ok{};
}

void InterruptSet::end_turn() {
  std::lock_guard lock(mu_);
  wake_due_locked(now_());
  const Clock::time_point now = now_();
  for (auto& [id, e] : live_) {
    if (e.state != InterruptState::kSnoozed || !e.until_turn_end) continue;
    if (!has_room(1)) {  // due now: woken once take_events makes room, like a passed delay
      e.until_turn_end = false;
      e.wake_at = now;
      continue;
    }
    set_state(e, InterruptState::kPending);
    emit(InterruptEventKind::kWoke, e);
  }
}

// A snooze whose time came while the queue is full stays snoozed until take_events makes room.
size_t InterruptSet::wake_due_locked(Clock::time_point now) {
  size_t woke = 0;
  for (auto& [id, e] : live_) {
    if (e.state != InterruptState::kSnoozed || !e.wake_at || *e.wake_at > now) continue;
    if (!has_room(1)) break;
    set_state(e, InterruptState::kPending);
    emit(InterruptEventKind::kWoke, e);
    ++woke;
  }
  return woke;
}

size_t InterruptSet::wake_due() {
  std::lock_guard lock(mu_);
  return wake_due_locked(now_());
}

std::optional<InterruptSet::Clock::time_point> InterruptSet::earliest_wake() const {
  std::optional<Clock::time_point> t;
  for (const auto& [id, e] : live_) {
    if (e.state == InterruptState::kSnoozed && e.wake_at && (!t || *e.wake_at < *t)) t = e.wake_at;
  }
  return t;
}

// Waits on the real clock: an injected clock is for wake_due, which tests call themselves.
void InterruptSet::run_timer() {
  std::unique_lock lock(mu_);
  while (!timer_stopped_) {
    wake_due_locked(now_());
    const uint64_t seen = next_seq_;
    // Until the earliest deadline, or a new event (a new snooze may come sooner). A deadline
    // already past is one whose wake waits for room in the queue: looked at again each second.
    const Clock::time_point limit = Clock::now() + std::chrono::seconds(1);
    const std::optional<Clock::time_point> t = earliest_wake();
    changed_.wait_until(lock, t && *t > Clock::now() ? std::min(*t, limit) : limit,
                        [&] { return next_seq_ != seen || timer_stopped_; });
  }
}

void InterruptSet::stop_timer() {
  std::lock_guard lock(mu_);
  timer_stopped_ = true;
  changed_.notify_all();
}

std::vector<AckedText> InterruptSet::take_acked(size_t max_bytes, size_t max_count) {
  std::vector<AckedText> out;
  if (acked_.load(std::memory_order_relaxed) == 0) return out;
  std::lock_guard lock(mu_);
  std::vector<Entry*> acked;
  for (auto& [id, e] : live_) {
    if (e.state == InterruptState::kAcked) acked.push_back(&e);
  }
  std::sort(acked.begin(), acked.end(),
            [](const Entry* a, const Entry* b) { return a->ack_order < b->ack_order; });
  size_t used = 0;
  for (Entry* e : acked) {
    if (out.size() >= max_count) break;
    std::string text = entry_text(*e);
    if (text.size() > max_bytes - used) break;
    used += text.size();
    set_state(*e, InterruptState::kInjected);
    emit(InterruptEventKind::kInjected, *e, text.size());  // its slot was reserved at ack
    out.push_back(
        {e->id, e->source, std::move(text), e->text.dropped_bytes(), e->text.total_bytes()});
    by_source_.erase(e->source);
    live_.erase(e->id);
  }
  return out;
}

void InterruptSet::announce_held() {
  for (auto& [id, e] : live_) {
    if (e.announced) continue;
    if (!has_room(1)) return;
    e.announced = true;
    e.state = InterruptState::kPending;
    pending_.fetch_add(1, std::memory_order_relaxed);
    emit(InterruptEventKind::kRaised, e);
  }
}

std::vector<InterruptEvent> InterruptSet::take_events(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  wake_due_locked(now_());
  if (events_.empty() && timeout.count() > 0) {
    changed_.wait_for(lock, timeout, [&] { return !events_.empty(); });
  }
  std::vector<InterruptEvent> out(events_.begin(), events_.end());
  events_.clear();
  // The room just made goes to what waited for it: held raises first (oldest), then wakes.
  announce_held();
  wake_due_locked(now_());
  return out;
}

std::vector<InterruptInfo> InterruptSet::list() const {
  std::lock_guard lock(mu_);
  std::vector<InterruptInfo> out;
  for (const auto& [id, e] : live_) {
    if (!e.announced) continue;
    InterruptInfo info;
    info.id = id;
    info.source = e.source;
    info.state = e.state;
    info.text_bytes = held_bytes(e);
    info.dropped_bytes = e.text.dropped_bytes();
    info.bursts = e.bursts;
    std::string text = entry_text(e);
    info.preview = text.substr(0, std::min(text.find('\n'), size_t(80)));
    info.until_turn_end = e.until_turn_end;
    info.wake_at = e.wake_at;
    out.push_back(std::move(info));
  }
  return out;
}

Result<std::string> InterruptSet::text(InterruptId id) const {
  std::lock_guard lock(mu_);
  auto it = live_.find(id);
  if (it == live_.end() || !it->second.announced) {
    return make_error(ErrorCode::kNotFound, "no such interrupt: " + std::to_string(id));
  }
  return entry_text(it->second);
}

uint64_t InterruptSet::last_seq() const {
  std::lock_guard lock(mu_);
  return next_seq_ - 1;
}

}  // namespace infer::tools
