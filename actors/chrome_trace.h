// --trace FILE (DESIGN.md §3): the Tracer that writes Chrome trace-event JSON, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open. Each span is a complete event ("ph":"X", ts and
// dur in µs with ns digits) on one track per actor (tid, named by a "thread_name" metadata
// event). Events are formatted into a buffer under a mutex and streamed to the file every
// kFlushBytes, so memory stays bounded however long the session; the file itself stops growing
// at max_bytes (later events are dropped and counted in a final "trace truncated" event).
// close() (or the destructor) writes the rest and the closing ']', so a session that ends
// normally (EOF, /quit, Ctrl-C at the prompt) leaves valid JSON; after a crash the file lacks
// only the ']', which the trace-event format allows.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/tracer.h"
#include "base/result.h"

namespace infer::actors {

class ChromeTrace final : public Tracer {
 public:
  static constexpr size_t kFlushBytes = size_t(64) << 10;
  static constexpr int64_t kDefaultMaxBytes = int64_t(1) << 30;  // ~10 M spans

  // Creates (truncates) `path` and writes the header.
  static Result<std::unique_ptr<ChromeTrace>> open(const std::filesystem::path& path,
                                                   int64_t max_bytes = kDefaultMaxBytes);
  ~ChromeTrace() override;
  ChromeTrace(const ChromeTrace&) = delete;
  ChromeTrace& operator=(const ChromeTrace&) = delete;

  void span(const char* actor, const char* what, int64_t t0_ns, int64_t t1_ns,
            int64_t arg) override;
  // Writes what is buffered and the closing ']'; later spans are ignored. Idempotent.
  void close();
  // An instant event named `label` on `actor`'s track at t_ns (steady clock): --serve's
  // TRACE_MARK, so a client can line its own events up with the engine's.
  void mark(const char* actor, const std::string& label, int64_t t_ns);

  int64_t dropped() const;  // spans not written because the file reached max_bytes

 private:
  ChromeTrace(std::FILE* file, int64_t max_bytes);
  int tid_of(const char* actor);  // under mu_; names a new track on first sight
  // Completes an event begun by span/mark (its fields up to the pid) with pid and track, under
  // the size cap.
  void emit(std::string event, const char* actor);
  void append(const std::string& event);  // under mu_
  void flush();                           // under mu_

  mutable std::mutex mu_;
  std::FILE* file_;
  const int64_t max_bytes_;
  const int64_t origin_ns_;  // ts 0: when the trace was opened
  std::string buf_;
  int64_t written_ = 0;  // bytes written or buffered
  int64_t dropped_ = 0;
  bool first_ = true;
  std::vector<std::string> actors_;  // tid i + 1
};

}  // namespace infer::actors
