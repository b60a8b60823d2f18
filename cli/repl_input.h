// What the REPL makes of the lines it reads: slash commands, and the turn a user composes over
// several lines (a line ending in "\", a """ block, a multi-line paste). Pure: no terminal.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace infer::cli {

enum class Command {
  kText, kEmpty, kHelp, kReset, kStats, kQuit, kMemory, kRemember, kForget, kTools, kBad,
  kTool,  // /pty, /ack, /snooze, /drop, /interrupts (cli/repl_tools.h parses the rest)
};

// One complete input. kText: `text` is the turn's text (a leading "//" loses one slash);
// kBad: `text` is the message ("unknown command /foo (try /help)"); kForget: `text` is the
// episode id (digits); kTool: `text` is the whole line, trimmed.
struct ReplInput {
  Command command = Command::kEmpty;
  std::string text;
};

// A line starting with one "/" is a command: its first word names it and commands take no
// arguments, except /forget N (an episode id) and the tool commands. Anything else is text (several lines always
// are); only whitespace is kEmpty.
ReplInput parse_input(std::string text);

// Collects the lines of one turn. A line ending in "\" goes on with the next line; a line """
// opens a block that a line """ closes; a multi-line paste joins the line being edited and the
// turn goes on until a line is entered (an empty one adds nothing). Lines join with "\n".
class Composer {
 public:
  // The input is complete with this line: the composed text; else nullopt (read another line).
  std::optional<std::string> add_line(std::string_view line);
  // A multi-line paste arrived while `line` was being edited: they join without a separator.
  void add_paste(std::string_view line, std::string_view paste);
  bool empty() const { return !started_; }  // nothing composed: the next line starts an input
  bool in_block() const { return in_block_; }
  void clear();

 private:
  void append(std::string_view piece);
  std::string finish();

  std::string text_;
  int pieces_ = 0;         // lines and pastes in text_
  bool started_ = false;   // a turn is being composed (pieces, or an open block)
  bool in_block_ = false;  // inside """ ... """
};

// The /help text: the commands and the input conventions.
std::string_view repl_help();

}  // namespace infer::cli
