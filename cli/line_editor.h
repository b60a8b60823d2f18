// The interactive REPL's line editor: libedit (emacs keys, history) reading through KeyReader,
// so bracketed pastes arrive whole. Bracketed paste mode is on only while a line is read, and
// the terminal is restored when a read returns and when the editor goes.
#pragma once

#include <signal.h>

#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cli/key_reader.h"
#include "cli/terminal_guard.h"

struct editline;
struct history;

namespace infer::cli {

// The history file: $XDG_STATE_HOME/infer/history (an absolute XDG_STATE_HOME, as the XDG
// spec asks), else $HOME/.local/state/infer/history; empty when neither is set.
std::filesystem::path history_file(const char* xdg_state_home, const char* home);

inline constexpr int kHistoryEntries = 1000;
// Longer inputs (pastes) are not kept: history is for what one types.
inline constexpr size_t kHistoryEntryMaxBytes = 4096;

struct EditorInput {
  enum class Kind { kLine, kPaste, kInterrupted, kEof };
  Kind kind = Kind::kEof;
  std::string line;   // kLine, kPaste: the line as edited (kPaste: before the paste)
  std::string paste;  // kPaste: a paste of several lines (one trailing newline dropped)
};

class LineEditor {
 public:
  // On stdin and stdout, both terminals; null when libedit cannot start. `interrupted` is the
  // SIGINT handler's flag (KeyReader clears it when it reports it). `history` empty: no history
  // file. Problems with the file are warnings.
  static std::unique_ptr<LineEditor> open(std::filesystem::path history,
                                          volatile sig_atomic_t* interrupted);
  ~LineEditor();
  LineEditor(const LineEditor&) = delete;
  LineEditor& operator=(const LineEditor&) = delete;

  EditorInput read(std::string_view prompt);
  // Adds an input to the history and saves the file.
  void remember(std::string_view entry);

 private:
  LineEditor(std::filesystem::path history, volatile sig_atomic_t* interrupted);
  static int read_char(editline* el, wchar_t* out);
  static char* prompt_text(editline* el);
  int next_char(wchar_t* out);
  void load_history();
  void warn(const std::string& what);

  TerminalGuard guard_;  // first: saves the settings before libedit changes them
  editline* el_ = nullptr;
  history* hist_ = nullptr;
  std::filesystem::path history_;
  KeyReader keys_;
  std::string prompt_;
  std::deque<char32_t> pending_;            // a one-line paste, typed into the line
  std::optional<EditorInput::Kind> ended_;  // why the current read's line ended, if not Enter
  std::string paste_;
  bool warned_ = false;
};

}  // namespace infer::cli
