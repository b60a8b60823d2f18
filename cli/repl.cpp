// The REPL and pipe mode. Each input becomes one Gemma chat user turn appended to the same
// context (cli/chat_turn.h builds its ids: the markers are control tokens, the user's text never
// is unless --special). On a terminal, libedit edits the line (cli/line_editor.h) and inputs may
// span lines (cli/repl_input.h); piped input is one turn a line. Ctrl-C while generating
// interrupts (the text so far stays in the context); at the prompt it drops the line being
// written, and at an empty prompt it leaves. In pipe mode a turn that fails makes the exit
// status 1 once the input is done. With --tools, /pty and the interrupt commands are
// cli/repl_tools.h's.
#include "cli/repl.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/pipeline.h"
#include "cli/chat_turn.h"
#include "cli/console_front_end.h"
#include "cli/line_editor.h"
#include "cli/repl_input.h"
#include "cli/repl_memory.h"
#include "cli/repl_tools.h"
#include "cli/session.h"

namespace infer::cli {
namespace {

std::atomic<actors::Pipeline*> g_pipeline{nullptr};
std::atomic<bool> g_generating{false};
std::atomic<bool> g_reading{false};  // waiting for input at the prompt
volatile sig_atomic_t g_sigint_at_prompt = 0;

// A Ctrl-C between a turn's end and the prompt (one meant to stop a model that just finished)
// is dropped rather than taken as "leave".
extern "C" void on_sigint(int) {
  actors::Pipeline* p = g_pipeline.load();
  if (g_generating.load() && p != nullptr) {
    p->interrupt();  // one atomic increment: async-signal-safe
  } else if (g_reading.load()) {
    g_sigint_at_prompt = 1;
  }
}

// Marks the time spent waiting for input.
struct Reading {
  Reading() { g_reading.store(true); }
  ~Reading() { g_reading.store(false); }
};

// Lines from fd 0 with read(2), so that a Ctrl-C at the prompt (EINTR) is seen: the pipe mode,
// and a terminal when stdout is not one (no line editing then).
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

// Where inputs come from: the line editor with multi-line composition, or plain lines.
class InputSource {
 public:
  InputSource(bool interactive, bool edit) : interactive_(interactive) {
    if (edit) {
      editor_ = LineEditor::open(history_file(std::getenv("XDG_STATE_HOME"), std::getenv("HOME")),
                                 &g_sigint_at_prompt);
      if (editor_ == nullptr) {
        std::fprintf(stderr,
                     "infer: the line editor (libedit) did not start: no editing or history\n");
      }
    }
  }
  // The next complete input; nullopt at the end (end of input, Ctrl-D, Ctrl-C at the prompt).
  std::optional<std::string> next() {
    const Reading reading;
    if (editor_ == nullptr) return next_line();
    for (;;) {
      EditorInput in = editor_->read(composer_.empty() ? "> " : ". ");
      switch (in.kind) {
        case EditorInput::Kind::kEof:
          std::fputs("\n", stdout);
          return std::nullopt;
        case EditorInput::Kind::kInterrupted:
          if (composer_.empty() && in.line.empty()) return std::nullopt;
          composer_.clear();  // like a shell: the input being written is dropped
          continue;
        case EditorInput::Kind::kPaste: {
          composer_.add_paste(in.line, in.paste);
          const size_t lines = size_t(std::count(in.paste.begin(), in.paste.end(), '\n')) + 1;
          std::printf("[pasted %zu lines, %zu bytes]\n", lines, in.paste.size());
          continue;
        }
        case EditorInput::Kind::kLine:
          if (std::optional<std::string> text = composer_.add_line(in.line)) {
            editor_->remember(*text);
            return text;
          }
          continue;
      }
    }
  }

 private:
  std::optional<std::string> next_line() {
    if (interactive_) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    std::string line;
    if (reader_.next(line) == LineReader::Status::kLine) return line;
    if (interactive_) std::fputs("\n", stdout);
    return std::nullopt;
  }

  bool interactive_;
  std::unique_ptr<LineEditor> editor_;
  Composer composer_;
  LineReader reader_;
};

// /tools: what the system turn declared.
void print_tools(const std::vector<ToolDeclaration>& tools, bool enabled) {
  if (!enabled) {
    std::puts("tools are off (start with --tools ROOT); a call the model writes is reported, "
              "not run");
  }
  for (const ToolDeclaration& t : tools) {
    std::printf("  %-13s %s\n", t.name.c_str(), t.description.c_str());
    if (t.parameters.is_object() && t.parameters.contains("properties")) {
      std::string args;
      for (const auto& [key, value] : t.parameters["properties"].items()) {
        args += (args.empty() ? "" : ", ") + key;
      }
      std::printf("  %-13s takes: %s\n", "", args.empty() ? "nothing" : args.c_str());
    }
  }
  std::fflush(stdout);
}

bool gate_on(const Options& o) {
  return o.gate_entropy || o.gate_top_prob || o.gate_end_prob || o.gate_yield ||
         o.gate_interrupts;
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
  // PTYs and interrupts (--tools): acked interrupts are injected between tokens, pending ones
  // are the gate's urgency. Declared before the pipeline, which uses them until it ends.
  std::unique_ptr<ReplTools> tools;
  if (!opts.tools_root.empty()) {
    INFER_TRY(tools, ReplTools::open(opts.tools_root.string()));
    session->pipeline.engine.boundary = tools->injection(tok);
    session->pipeline.gate.pending_interrupts = &tools->pending_counter();
    tools->set_tracer(session->pipeline.tracer);
  }
  ConsoleFrontEnd front(opts.output);
  actors::Pipeline pipeline(session->forward, session->pipeline, front);
  // The SIGINT handler forgets the pipeline before it goes, on every way out.
  struct Forget {
    ~Forget() { g_pipeline.store(nullptr); }
  } forget;

  if (interactive) {
    g_pipeline.store(&pipeline);
    struct sigaction sa{};
    sa.sa_handler = on_sigint;  // no SA_RESTART: read() returns EINTR at the prompt
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    pthread_sigmask(SIG_UNBLOCK, &sigint, nullptr);
    std::fprintf(stderr,
                 "infer: interactive session with %s (%s). Ctrl-C interrupts the model; "
                 "/help for commands and input, /quit or Ctrl-D to leave.\n",
                 session->choice.dir.string().c_str(), session->backend_name.c_str());
  }
  // Declared after the pipeline so that it goes first, restoring the terminal.
  InputSource source(interactive, interactive && isatty(STDOUT_FILENO));

  ChatTurnSpec spec;
  spec.special = opts.special;
  if (opts.system_prompt) spec.system = *opts.system_prompt;
  // With --tools the system turn declares them (and so opens every context, --system or not).
  const std::vector<ToolDeclaration> declared = pipeline.tool_declarations();
  spec.tools = declared;
  int failed_turns = 0, bad_commands = 0;
  // One generating turn of `ids` (none: the model goes on, e.g. with an acked interrupt).
  const auto run_turn = [&](std::vector<int32_t> ids) {
    const int errors_before = front.errors();
    g_generating.store(true);
    const uint64_t turn = pipeline.send("", std::move(ids), true, opts.max_tokens);
    const actors::TurnEnd end = front.wait_turn(turn);
    g_generating.store(false);
    if (front.was_appended(turn)) spec.opens_context = false;
    if (end.reason == actors::StopReason::kError || front.errors() != errors_before) {
      ++failed_turns;
    }
    std::fputs("\n", stdout);
    if (interactive && end.reason != actors::StopReason::kEndToken &&
        end.reason != actors::StopReason::kTokenLimit) {
      std::printf("[%s]\n", actors::stop_reason_name(end.reason));
    }
    std::fflush(stdout);
    interactive ? print_turn_speed(end) : print_turn_line(turn, end);
    if (tools) tools->turn_ended();
  };
  const auto next_input = [&] {
    if (tools) tools->report(stdout);  // what the interrupts did since the last prompt
    return source.next();
  };
  while (std::optional<std::string> text = next_input()) {
    const ReplInput in = parse_input(std::move(*text));
    switch (in.command) {
      case Command::kEmpty:
        continue;
      case Command::kHelp:
        std::fputs(repl_help().data(), stdout);
        std::fflush(stdout);
        continue;
      case Command::kBad:
        std::fflush(stdout);
        std::fprintf(stderr, "infer: %s\n", in.text.c_str());
        ++bad_commands;
        continue;
      case Command::kReset:
        pipeline.reset();
        front.wait_reset();
        spec.opens_context = true;
        if (interactive) std::puts("(context cleared)");
        continue;
      case Command::kStats: {
        const Result<actors::PipelineStats> st = pipeline.stats();
        if (!st) return st.error();
        print_stats(*st, gate_on(opts));
        continue;
      }
      case Command::kMemory:
      case Command::kRemember:
      case Command::kForget:
        if (!run_memory_command(in, session->pipeline.memory != nullptr, pipeline, front)) {
          ++bad_commands;
        }
        continue;
      case Command::kTools:
        print_tools(declared, pipeline.tools_enabled());
        continue;
      case Command::kQuit:
        break;
      case Command::kTool: {
        if (!tools) {
          std::fflush(stdout);
          std::fprintf(stderr, "infer: %s needs --tools ROOT (PTYs run in ROOT)\n",
                       in.text.substr(0, in.text.find(' ')).c_str());
          ++bad_commands;
          continue;
        }
        const ToolCommandResult r = tools->run(in.text, stdout);
        if (!r.ok) ++bad_commands;
        if (r.continue_turn) run_turn({});
        continue;
      }
      case Command::kText:
        run_turn(chat_turn_ids(tok, in.text, spec));
        continue;
    }
    break;  // kQuit
  }
  if (!interactive && (failed_turns > 0 || bad_commands > 0)) {
    // Each failure was reported on stderr as it happened; the status tells the script.
    std::string what = failed_turns > 0 ? std::to_string(failed_turns) + " turn(s) failed" : "";
    if (bad_commands > 0) {
      what += (what.empty() ? "" : ", ") + std::to_string(bad_commands) + " command(s) refused";
    }
    return make_error(ErrorCode::kInternal, "pipe input: " + what + " (see above)");
  }
  return Ok{};
}

}  // namespace infer::cli
