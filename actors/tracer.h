// The tracing hook (DESIGN.md §3, --trace): every actor reports one span per message it
// handles, the stream one per token and per prefill chunk. No tracer (nullptr) is the default
// and costs a pointer test; the Chrome trace-event writer of --trace implements Tracer later.
#pragma once

#include <chrono>
#include <cstdint>

namespace infer::actors {

// Called from every actor's thread at once: implementations synchronise themselves.
class Tracer {
 public:
  virtual ~Tracer() = default;
  // `actor` handled `what` (a message or "token" / "prefill") from t0 to t1 (steady clock, ns);
  // arg: the step, the chunk's ids or the turn, -1 when none. Both strings are literals.
  virtual void span(const char* actor, const char* what, int64_t t0_ns, int64_t t1_ns,
                    int64_t arg) = 0;
};

inline int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// RAII span: reports [construction, destruction) when a tracer is set.
class TraceScope {
 public:
  TraceScope(Tracer* tracer, const char* actor, const char* what, int64_t arg = -1)
      : tracer_(tracer), actor_(actor), what_(what), arg_(arg), t0_(tracer ? steady_ns() : 0) {}
  ~TraceScope() {
    if (tracer_ != nullptr) tracer_->span(actor_, what_, t0_, steady_ns(), arg_);
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Tracer* tracer_;
  const char* actor_;
  const char* what_;
  int64_t arg_;
  int64_t t0_;
};

}  // namespace infer::actors
