// Slash commands and multi-line composition for the REPL (cli/repl.cpp).
#include "cli/repl_input.h"

#include <utility>

namespace infer::cli {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

constexpr std::string_view kBlockFence = "\"\"\"";

// The PTY and interrupt commands, run by cli/repl_tools.cpp with their arguments.
bool is_tool_command(std::string_view name) {
  return name == "/pty" || name == "/ack" || name == "/snooze" || name == "/drop" ||
         name == "/interrupts";
}

}  // namespace

ReplInput parse_input(std::string text) {
  if (text.starts_with("//")) return {Command::kText, text.substr(1)};
  const std::string_view t = trim(text);
  if (t.empty()) return {Command::kEmpty, {}};
  // Several lines are a turn's text even when they start with "/".
  if (!text.starts_with("/") || text.find('\n') != std::string::npos) {
    return {Command::kText, std::move(text)};
  }
  size_t end = 0;
  while (end < t.size() && !is_space(t[end])) ++end;
  const std::string_view name = t.substr(0, end);
  Command c = Command::kBad;
  if (name == "/help" || name == "/?") c = Command::kHelp;
  if (name == "/reset") c = Command::kReset;
  if (name == "/stats") c = Command::kStats;
  if (name == "/quit" || name == "/exit") c = Command::kQuit;
  if (name == "/memory") c = Command::kMemory;
  if (name == "/remember") c = Command::kRemember;
  if (name == "/forget") c = Command::kForget;
  if (name == "/tools") c = Command::kTools;
  if (is_tool_command(name)) return {Command::kTool, std::string(t)};
  if (c == Command::kBad) {
    return {c, "unknown command " + std::string(name) +
                   " (try /help; // sends a line that begins with /)"};
  }
  if (c == Command::kForget) {
    const std::string_view arg = trim(t.substr(end));
    const bool digits = !arg.empty() && arg.size() <= 19 &&
                        arg.find_first_not_of("0123456789") == std::string_view::npos;
    if (!digits) return {Command::kBad, "/forget takes an episode id (a number, see /memory)"};
    return {c, std::string(arg)};
  }
  if (end < t.size()) return {Command::kBad, std::string(name) + " takes no arguments"};
  return {c, {}};
}

std::optional<std::string> Composer::add_line(std::string_view line) {
  if (in_block_) {
    if (line == kBlockFence) return finish();
    append(line);
    return std::nullopt;
  }
  if (!started_ && line == kBlockFence) {
    started_ = in_block_ = true;
    return std::nullopt;
  }
  if (line.ends_with('\\')) {
    line.remove_suffix(1);
    append(line);
    return std::nullopt;
  }
  // After a continued line or a paste, an empty line only ends the turn.
  if (pieces_ == 0 || !line.empty()) append(line);
  return finish();
}

void Composer::add_paste(std::string_view line, std::string_view paste) {
  append(std::string(line) + std::string(paste));
}

void Composer::clear() {
  text_.clear();
  pieces_ = 0;
  started_ = in_block_ = false;
}

void Composer::append(std::string_view piece) {
  if (pieces_ > 0) text_ += '\n';
  text_ += piece;
  ++pieces_;
  started_ = true;
}

std::string Composer::finish() {
  std::string out = std::move(text_);
  clear();
  return out;
}

std::string_view repl_help() {
  return R"(Commands:
  /help     this text (also /?)
  /reset    empty the context (the next turn starts afresh, with the --system turn if any)
  /stats    the context's size, turns and speeds
  /memory   episodic memory (--memory): the last recall's episodes with their
            scores, and the store (episodes, capacity, file)
  /remember store the conversation's tokens not yet stored as episodes now
  /forget N remove episode N from the store
  /tools    the tools the model may call (--tools ROOT), as declared to it
  /quit     leave (also /exit, Ctrl-D, or Ctrl-C at an empty prompt)
  //text    sends "/text": a line starting with one / is a command
)" R"(PTYs and interrupts (with --tools ROOT):
  /pty open CMD   run CMD on a new PTY in ROOT (as sh -c 'exec CMD')
  /pty            list the PTYs
  /pty N          attach to PTY N: its output, your keys go to it; Ctrl-] returns
                  (without a terminal: print its recent text)
  /pty N TEXT     type TEXT and Enter into PTY N
  /pty close N    end PTY N
  /interrupts     the interrupts waiting: new PTY output raises one per PTY
  /ack N          inject interrupt N into the model's turn now; the model goes on
  /snooze N [S]   until the next turn ends, or for S seconds; then pending again
  /drop N         forget interrupt N
Input:
  Enter sends the line as one turn. A line ending in \ goes on at the next line;
  a line """ opens a block of lines that a line """ closes (one turn).
  A paste of several lines becomes part of the turn being written, shown as
  [pasted N lines, B bytes]; type more or press Enter to send. A one-line paste
  is inserted where the cursor is. What you type stays text: "<turn|>" and the
  other control tokens are only spelled out, unless infer runs with --special.
  Keys: arrows and Ctrl-A/E/B/F/K/U/W edit the line, Up/Down recall earlier input
  (kept in $XDG_STATE_HOME/infer/history, else ~/.local/state/infer/history).
  Ctrl-C stops the model while it writes; at the prompt it drops the line being
  written, and at an empty prompt it leaves.
)";
}

}  // namespace infer::cli
