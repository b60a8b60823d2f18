// Prints what the pipeline sends back; the main thread waits on turn ends and resets.
#include "cli/console_front_end.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "cli/session.h"

namespace infer::cli {
namespace {

double per_second(int64_t n, double ms) { return ms > 0 ? double(n) / ms * 1e3 : 0.0; }

}  // namespace

void ConsoleFrontEnd::token(const actors::TokenEvent& t) {
  if (t.tool_call && mode_ == OutputMode::kText) return;  // the call shows as a tool event
  if (t.inserted()) return;  // a response or an injected interrupt: shown as its own event
  if (mode_ == OutputMode::kIds) {
    std::printf(t.step == 0 ? "%d" : " %d", t.id);
  } else {
    std::fwrite(t.text.data(), 1, t.text.size(), stdout);
  }
  std::fflush(stdout);
}

namespace {

// A value for one line: at most `max` bytes, cut on a character boundary.
std::string cut(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "...";
}

}  // namespace

std::string describe_tool_event(const actors::ToolEvent& e) {
  const std::string id = "[tool " + std::to_string(e.call_id) + ": ";
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.1f ms", e.ms);
  switch (e.kind) {
    case actors::ToolEventKind::kCall:
    case actors::ToolEventKind::kClientCall:
      return id + e.name + " " + cut(e.arguments, 200) + "]";
    case actors::ToolEventKind::kResult:
      return id + std::to_string(e.result_bytes) + " bytes back in " + ms + "]";
    case actors::ToolEventKind::kError:
      return id + (e.name.empty() ? "" : e.name + ": ") + cut(e.message, 300) + "]";
    case actors::ToolEventKind::kNotRun:
      return id + e.name + " not run: " + e.message + "]";
  }
  return id + "?]";
}

void ConsoleFrontEnd::tool_event(const actors::ToolEvent& e) {
  std::fflush(stdout);
  std::fprintf(stderr, "\n%s\n", describe_tool_event(e).c_str());
}

void ConsoleFrontEnd::appended(const actors::InputAppended& a) {
  notify([&] { appended_.insert(a.turn); });
}

void ConsoleFrontEnd::turn_end(const actors::TurnEnd& e) {
  std::fwrite(e.tail_text.data(), 1, e.tail_text.size(), stdout);
  std::fflush(stdout);
  notify([&] { ends_.push_back(e); });
}

void ConsoleFrontEnd::reset_done() {
  notify([&] { ++resets_; });
}

void ConsoleFrontEnd::error(const actors::ErrorEvent& e) {
  std::fflush(stdout);
  std::fprintf(stderr, "infer: %s\n", e.message.c_str());
  notify([&] { ++errors_; });
}

actors::TurnEnd ConsoleFrontEnd::wait_turn(uint64_t turn) {
  std::unique_lock lock(mu_);
  for (;;) {
    for (auto it = ends_.begin(); it != ends_.end(); ++it) {
      if (it->turn == turn) {
        actors::TurnEnd e = *it;
        ends_.erase(it);
        return e;
      }
    }
    cv_.wait(lock);
  }
}

void ConsoleFrontEnd::memory_reply(const actors::MemoryReply& r) {
  notify([&] { memory_.push_back(r); });
}

actors::MemoryReply ConsoleFrontEnd::wait_memory(uint64_t ticket) {
  std::unique_lock lock(mu_);
  for (;;) {
    for (auto it = memory_.begin(); it != memory_.end(); ++it) {
      if (it->ticket == ticket) {
        actors::MemoryReply r = std::move(*it);
        memory_.erase(it);
        return r;
      }
    }
    cv_.wait(lock);
  }
}

void ConsoleFrontEnd::wait_reset() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return resets_ > 0; });
  --resets_;
}

bool ConsoleFrontEnd::was_appended(uint64_t turn) {
  std::lock_guard lock(mu_);
  return appended_.contains(turn);
}

int ConsoleFrontEnd::errors() {
  std::lock_guard lock(mu_);
  return errors_;
}

void print_stats(const actors::PipelineStats& s, bool gate_on) {
  // The ring's bound is only there to keep counts finite: an endless stream has no "of N".
  const std::string of = s.max_positions >= kEndlessPositions
                             ? std::string(" (the KV ring: endless)")
                             : " of " + std::to_string(s.max_positions) + " positions";
  std::printf(
      "context: %lld tokens%s (%lld computed), %llu turns, %lld tokens generated\n"
      "prefill: %.1f tokens/s, decode: %.1f tokens/s\n",
      (long long)s.position, of.c_str(), (long long)s.fed, (unsigned long long)s.turns,
      (long long)s.generated, per_second(s.prefilled, s.prefill_ms),
      per_second(s.decoded, s.decode_ms));
  if (gate_on) {
    std::printf(
        "gate (--gate-*): let the model say %lld tokens, stopped it to listen %lld "
        "times, to act %lld times\n",
        (long long)s.speak, (long long)s.listen, (long long)s.act);
  }
  std::fflush(stdout);
}

void print_turn_speed(const actors::TurnEnd& e) {
  // The first token comes from the prefill's logits: the decode steps are the others.
  const int64_t decoded = std::max<int64_t>(0, e.generated - 1);
  const bool dim = isatty(STDERR_FILENO);
  std::fprintf(stderr, "%s[%lld tokens, %.1f tokens/s, prefill %lld tokens in %.2f s]%s\n",
               dim ? "\x1b[2m" : "", (long long)e.generated, per_second(decoded, e.decode_ms),
               (long long)e.prefilled, e.prefill_ms / 1e3, dim ? "\x1b[0m" : "");
}

void print_turn_line(uint64_t turn, const actors::TurnEnd& e) {
  const int64_t decoded = std::max<int64_t>(0, e.generated - 1);
  std::fprintf(stderr, "turn %llu: %lld tokens (%s), %.1f tokens/s\n", (unsigned long long)turn,
               (long long)e.generated, actors::stop_reason_name(e.reason),
               per_second(decoded, e.decode_ms));
}

}  // namespace infer::cli
