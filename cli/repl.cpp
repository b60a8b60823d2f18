// The REPL and pipe mode. Each input line becomes one Gemma chat user turn appended to the same
// context, "<|turn>user\n{line}<turn|>\n<|turn>model\n" (encoded as raw text, so the markers are
// the added tokens 105/106, as the chat fixtures show); the first turn after a start or /reset
// begins with <bos>, and every later one first closes the model's turn with "<turn|>\n" (the
// end id it sampled, or the point where it was interrupted, is not in the context). Ctrl-C while
// generating interrupts (the text so far stays in the context); Ctrl-C at the prompt leaves.
#include "cli/repl.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "actors/pipeline.h"
#include "cli/session.h"

namespace infer::cli {
namespace {

std::atomic<actors::Pipeline*> g_pipeline{nullptr};
std::atomic<bool> g_generating{false};
volatile sig_atomic_t g_sigint_at_prompt = 0;

extern "C" void on_sigint(int) {
  actors::Pipeline* p = g_pipeline.load();
  if (g_generating.load() && p != nullptr) {
    p->interrupt();  // one atomic increment: async-signal-safe
  } else {
    g_sigint_at_prompt = 1;
  }
}

// Prints tokens as they come (text, or ids with --output ids) and hands turn ends and resets to
// the main thread.
class ConsoleFrontEnd : public actors::FrontEnd {
 public:
  explicit ConsoleFrontEnd(OutputMode mode) : mode_(mode) {}

  void token(const actors::TokenEvent& t) override {
    if (mode_ == OutputMode::kIds) {
      std::printf(t.step == 0 ? "%d" : " %d", t.id);
    } else {
      std::fwrite(t.text.data(), 1, t.text.size(), stdout);
    }
    std::fflush(stdout);
  }
  void turn_end(const actors::TurnEnd& e) override {
    std::fwrite(e.tail_text.data(), 1, e.tail_text.size(), stdout);
    std::fflush(stdout);
    notify([&] { ends_.push_back(e); });
  }
  void reset_done() override { notify([&] { ++resets_; }); }
  void error(const actors::ErrorEvent& e) override {
    std::fflush(stdout);
    std::fprintf(stderr, "infer: %s\n", e.message.c_str());
  }

  actors::TurnEnd wait_turn(uint64_t turn) {
    std::unique_lock lock(mu_);
    for (;;) {
      for (const auto& e : ends_) {
        if (e.turn == turn) return e;
      }
      cv_.wait(lock);
    }
  }
  void wait_reset() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return resets_ > 0; });
    --resets_;
  }

 private:
  template <class F>
  void notify(F f) {
    {
      std::lock_guard lock(mu_);
      f();
    }
    cv_.notify_all();
  }

  OutputMode mode_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<actors::TurnEnd> ends_;
  int resets_ = 0;
};

// Lines from fd 0 with read(2), so that a Ctrl-C at the prompt (EINTR) is seen.
class LineReader {
 public:
  enum class Status { kLine, kEof, kInterrupted };
  Status next(std::string& line) {
    for (;;) {
      if (const size_t nl = buf_.find('\n'); nl != std::string::npos) {
        line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return Status::kLine;
      }
      char chunk[4096];
      const ssize_t n = read(STDIN_FILENO, chunk, sizeof chunk);
      if (n > 0) {
        buf_.append(chunk, size_t(n));
      } else if (n < 0 && errno == EINTR) {
        if (g_sigint_at_prompt) return Status::kInterrupted;
      } else if (buf_.empty()) {
        return Status::kEof;
      } else {  // a last line without a newline
        line.swap(buf_);
        buf_.clear();
        return Status::kLine;
      }
    }
  }

 private:
  std::string buf_;
};

void print_stats(const actors::PipelineStats& s) {
  const double prefill_tps = s.prefill_ms > 0 ? double(s.prefilled) / s.prefill_ms * 1e3 : 0.0;
  const double decode_tps = s.decode_ms > 0 ? double(s.decoded) / s.decode_ms * 1e3 : 0.0;
  // The ring's bound is only there to keep counts finite: an endless stream has no "of N".
  const std::string of = s.max_positions >= kEndlessPositions
                             ? std::string(" (the KV ring: endless)")
                             : " of " + std::to_string(s.max_positions) + " positions";
  std::printf(
      "context: %lld tokens%s (%lld computed), %llu turns, %lld tokens generated\n"
      "prefill: %.1f tokens/s, decode: %.1f tokens/s\n"
      "gate: speak %lld, listen %lld, act %lld\n",
      (long long)s.position, of.c_str(), (long long)s.fed,
      (unsigned long long)s.turns, (long long)s.generated, prefill_tps, decode_tps,
      (long long)s.speak, (long long)s.listen, (long long)s.act);
  std::fflush(stdout);
}

}  // namespace

StdinKind stdin_kind() {
  if (isatty(STDIN_FILENO)) return StdinKind::kTerminal;
  struct stat st{};
  if (fstat(STDIN_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode))) {
    return StdinKind::kPipe;
  }
  return StdinKind::kOther;
}

Result<void> run_repl(const Options& opts, bool interactive) {
  // Only the main thread takes SIGINT (so a Ctrl-C at the prompt interrupts its read): every
  // thread started from here on inherits the blocked mask.
  sigset_t sigint;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  if (interactive) pthread_sigmask(SIG_BLOCK, &sigint, nullptr);

  INFER_TRY(std::unique_ptr<Session> session, open_session(opts, true));
  const Tokenizer& tok = *session->tokenizer;
  ConsoleFrontEnd front(opts.output);
  actors::Pipeline pipeline(session->forward, session->pipeline, front);

  if (interactive) {
    g_pipeline.store(&pipeline);
    struct sigaction sa{};
    sa.sa_handler = on_sigint;  // no SA_RESTART: read() returns EINTR at the prompt
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    pthread_sigmask(SIG_UNBLOCK, &sigint, nullptr);
    std::fprintf(stderr,
                 "infer: interactive session with %s (%s). Ctrl-C interrupts the model; "
                 "/reset, /stats, /quit (or Ctrl-C at the prompt) to leave.\n",
                 session->choice.dir.string().c_str(), session->backend_name.c_str());
  }

  const std::string bos = tok.bos_id() >= 0 ? std::string(tok.id_to_token(tok.bos_id())) : "";
  bool fresh = true;  // the next turn opens the context
  LineReader reader;
  std::string line;
  for (;;) {
    if (interactive) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    const LineReader::Status st = reader.next(line);
    if (st != LineReader::Status::kLine) {
      if (interactive) std::fputs("\n", stdout);
      break;
    }
    if (line == "/quit") break;
    if (line == "/reset") {
      pipeline.reset();
      front.wait_reset();
      fresh = true;
      if (interactive) std::puts("(context cleared)");
      continue;
    }
    if (line == "/stats") {
      const Result<actors::PipelineStats> st = pipeline.stats();
      if (!st) return st.error();
      print_stats(*st);
      continue;
    }
    if (line.empty()) continue;
    const std::string text = (fresh ? bos : std::string("<turn|>\n")) + "<|turn>user\n" + line +
                             "<turn|>\n<|turn>model\n";
    g_generating.store(true);
    const uint64_t turn = pipeline.send(text, {}, true, opts.max_tokens);
    const actors::TurnEnd end = front.wait_turn(turn);
    g_generating.store(false);
    fresh = false;
    std::fputs("\n", stdout);
    if (interactive && end.reason != actors::StopReason::kEndToken &&
        end.reason != actors::StopReason::kTokenLimit) {
      std::printf("[%s]\n", actors::stop_reason_name(end.reason));
    }
    std::fflush(stdout);
    if (!interactive) {
      const int64_t decoded = std::max<int64_t>(0, end.generated - 1);
      std::fprintf(stderr, "turn %llu: %lld tokens (%s), %.1f tokens/s\n",
                   (unsigned long long)turn, (long long)end.generated,
                   actors::stop_reason_name(end.reason),
                   end.decode_ms > 0 ? double(decoded) / end.decode_ms * 1e3 : 0.0);
    }
  }
  g_pipeline.store(nullptr);
  return Ok{};
}

}  // namespace infer::cli
