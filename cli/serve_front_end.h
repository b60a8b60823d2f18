// ServeFrontEnd: the --serve session's state between the frame reader (stdin thread) and the
// actor pipeline's io thread (docs/PROTOCOL.md §6.3, §8). One mutex orders both sides; every
// frame is written whole to stdout under it, so frames never interleave.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "actors/chrome_trace.h"
#include "actors/front_end.h"
#include "actors/pipeline.h"
#include "protocol/messages.h"
#include "protocol/server_reader.h"

namespace infer::cli {

class ServeFrontEnd : public actors::FrontEnd {
 public:
  // Frames go to `out_fd`; -n (the default GENERATE max_tokens) is `default_max_tokens`.
  ServeFrontEnd(int out_fd, protocol::ServerHello hello, int64_t default_max_tokens);

  // Must be called once, before the first handle(); the pipeline must outlive the calls.
  void attach(actors::Pipeline* p) { pipeline_ = p; }
  // --trace: TRACE_MARK frames become instant events on the io track (nullptr: none).
  void set_trace(actors::ChromeTrace* trace) { trace_ = trace; }

  // What the reader thread should do after handling a chunk of input.
  enum class Next { kContinue, kShutdown, kMismatch };
  // Feeds bytes read from stdin; handles every frame they complete.
  Next feed(const uint8_t* data, size_t n);
  // End of input: TRUNCATED if it ended inside a frame, then the running generation is stopped.
  void eof();
  // Stops the running generation (if any), drops queued appends and waits until every request
  // handed to the pipeline is answered.
  void finish_generation();
  // SHUTDOWN_ACK, then nothing more is written.
  void shutdown_ack();
  // Nothing more is written (the session is over).
  void close_output();
  bool output_closed();

  // actors::FrontEnd, on the io actor's thread.
  void token(const actors::TokenEvent& t) override;
  void turn_end(const actors::TurnEnd& e) override;
  void stats(const actors::PipelineStats& s) override;
  void reset_done() override;
  void error(const actors::ErrorEvent& e) override;

 private:
  actors::ChromeTrace* trace_ = nullptr;
  enum class TurnKind { kAppend, kGenerate, kInternal };
  struct TurnInfo {
    TurnKind kind = TurnKind::kAppend;
    uint32_t rid = 0;
  };
  struct Queued {  // an APPEND that arrived while generating
    uint32_t rid = 0;
    protocol::ClientMessage message;
  };

  Next handle(uint32_t rid, const protocol::ClientMessage& m);
  void send_append(uint32_t rid, const protocol::ClientMessage& m);
  void start_generation(uint32_t rid, const protocol::Generate& g);
  void interrupt_generation();
  void flush_queue();
  // write() = append() + flush(): frames are encoded into buf_ and written with one syscall.
  void write(const protocol::ServerMessage& m, uint32_t rid);
  void append(const protocol::ServerMessage& m, uint32_t rid);
  void flush();
  protocol::Stats current_stats() const;

  int out_fd_;
  protocol::ServerHello hello_;
  int64_t default_max_tokens_;
  actors::Pipeline* pipeline_ = nullptr;
  protocol::ServerReader reader_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();

  std::mutex mu_;
  std::condition_variable cv_;  // the generation ended
  bool out_closed_ = false;
  std::vector<uint8_t> buf_;
  std::map<uint64_t, TurnInfo> turns_;  // pipeline turn -> what it answers
  std::vector<Queued> queued_;
  std::deque<uint32_t> reset_rids_, stats_rids_;
  uint32_t shutdown_rid_ = 0;

  // The running generation (gen_turn_ 0: none).
  uint64_t gen_turn_ = 0;
  uint32_t gen_rid_ = 0;
  uint32_t gen_flags_ = 0;
  uint32_t gen_sent_ = 0;        // TOKEN frames sent
  uint32_t gen_last_id_ = protocol::kNoToken;
  bool gen_interrupted_ = false;
  uint32_t after_interrupt_ = 0;  // TOKENs sent since the interrupt was read

  // STATS, over the session.
  int64_t pos_ = 0;
  uint64_t prefill_tokens_ = 0, decode_tokens_ = 0, generations_ = 0;
  double prefill_ms_ = 0.0, decode_ms_ = 0.0;
};

}  // namespace infer::cli
