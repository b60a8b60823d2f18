// libedit behind LineEditor: our own character reader (EL_GETCFN) catches bracketed pastes and
// Ctrl-C; libedit does the editing, the keys and the history.
#include "cli/line_editor.h"

#include <histedit.h>
#include <langinfo.h>
#include <unistd.h>

#include <clocale>
#include <cstdio>
#include <cstring>
#include <system_error>

namespace infer::cli {
namespace {

constexpr const char* kPasteOn = "\x1b[?2004h";
constexpr const char* kPasteOff = "\x1b[?2004l";

void write_stdout(const char* s) {
  std::fputs(s, stdout);
  std::fflush(stdout);
}

// libedit turns the wide characters it edits back into bytes through the locale's LC_CTYPE;
// the model's text is UTF-8 whatever the locale says, so the editor needs a UTF-8 LC_CTYPE.
void use_utf8_ctype() {
  std::setlocale(LC_CTYPE, "");
  if (std::strcmp(nl_langinfo(CODESET), "UTF-8") != 0) std::setlocale(LC_CTYPE, "C.UTF-8");
}

}  // namespace

std::filesystem::path history_file(const char* xdg_state_home, const char* home) {
  if (xdg_state_home != nullptr && xdg_state_home[0] == '/') {
    return std::filesystem::path(xdg_state_home) / "infer" / "history";
  }
  if (home != nullptr && home[0] != '\0') {
    return std::filesystem::path(home) / ".local" / "state" / "infer" / "history";
  }
  return {};
}

std::unique_ptr<LineEditor> LineEditor::open(std::filesystem::path history,
                                             volatile sig_atomic_t* interrupted) {
  std::unique_ptr<LineEditor> e(new LineEditor(std::move(history), interrupted));
  if (e->el_ == nullptr || e->hist_ == nullptr) return nullptr;
  e->load_history();
  return e;
}

LineEditor::LineEditor(std::filesystem::path history_path, volatile sig_atomic_t* interrupted)
    : history_(std::move(history_path)), keys_(STDIN_FILENO, interrupted) {
  use_utf8_ctype();
  el_ = el_init("infer", stdin, stdout, stderr);
  hist_ = history_init();
  if (el_ == nullptr || hist_ == nullptr) return;
  el_set(el_, EL_EDITOR, "emacs");
  el_set(el_, EL_SIGNAL, 0);  // SIGINT is the REPL's (cli/repl.cpp)
  el_set(el_, EL_CLIENTDATA, this);
  el_set(el_, EL_PROMPT, &LineEditor::prompt_text);
  el_set(el_, EL_GETCFN, &LineEditor::read_char);
  HistEvent ev;
  history(hist_, &ev, H_SETSIZE, kHistoryEntries);
  history(hist_, &ev, H_SETUNIQUE, 1);
  el_set(el_, EL_HIST, ::history, hist_);
}

void LineEditor::load_history() {
  if (history_.empty()) {
    warn("no history: neither XDG_STATE_HOME nor HOME is set");
    return;
  }
  HistEvent ev;
  std::error_code ec;
  if (std::filesystem::exists(history_, ec) && history(hist_, &ev, H_LOAD, history_.c_str()) < 0) {
    warn("could not read the history file " + history_.string());
  }
}

LineEditor::~LineEditor() {
  write_stdout(kPasteOff);
  if (hist_ != nullptr) history_end(hist_);
  if (el_ != nullptr) el_end(el_);  // restores the terminal's settings
}

void LineEditor::warn(const std::string& what) {
  if (warned_) return;
  warned_ = true;
  std::fprintf(stderr, "infer: %s (going on without saving history)\n", what.c_str());
}

char* LineEditor::prompt_text(editline* el) {
  void* self = nullptr;
  el_get(el, EL_CLIENTDATA, &self);
  return static_cast<LineEditor*>(self)->prompt_.data();
}

int LineEditor::read_char(editline* el, wchar_t* out) {
  void* self = nullptr;
  el_get(el, EL_CLIENTDATA, &self);
  return static_cast<LineEditor*>(self)->next_char(out);
}

// One character for libedit: 1 with *out set, 0 at the end of input. Ctrl-C and a multi-line
// paste end the line with a newline and say why in ended_.
int LineEditor::next_char(wchar_t* out) {
  while (pending_.empty()) {
    Key k = keys_.next();
    switch (k.kind) {
      case Key::Kind::kChar:
        *out = wchar_t(k.ch);
        return 1;
      case Key::Kind::kEof:
        return 0;
      case Key::Kind::kInterrupted:
        ended_ = EditorInput::Kind::kInterrupted;
        *out = L'\n';
        return 1;
      case Key::Kind::kPaste:
        if (k.paste.ends_with('\n')) k.paste.pop_back();
        if (k.paste.find('\n') != std::string::npos) {
          ended_ = EditorInput::Kind::kPaste;
          paste_ = std::move(k.paste);
          *out = L'\n';
          return 1;
        }
        // One line: typed in, without the control characters that would act as keys.
        for (char32_t c : decode_utf8(k.paste)) {
          if (c >= 0x20 && c != 0x7F) pending_.push_back(c);
          if (c == U'\t') pending_.push_back(U' ');
        }
        break;
    }
  }
  *out = wchar_t(pending_.front());
  pending_.pop_front();
  return 1;
}

EditorInput LineEditor::read(std::string_view prompt) {
  prompt_ = prompt;
  ended_.reset();
  paste_.clear();
  el_resize(el_);  // the terminal may have changed size while the model wrote
  write_stdout(kPasteOn);
  int count = 0;
  const char* line = el_gets(el_, &count);
  write_stdout(kPasteOff);
  EditorInput in;
  if (line != nullptr && count > 0) {
    in.line.assign(line, size_t(count));
    if (in.line.ends_with('\n')) in.line.pop_back();
  }
  if (ended_) {
    in.kind = *ended_;
    in.paste = std::move(paste_);
  } else {
    in.kind = line == nullptr ? EditorInput::Kind::kEof : EditorInput::Kind::kLine;
  }
  return in;
}

void LineEditor::remember(std::string_view entry) {
  if (entry.empty() || entry.size() > kHistoryEntryMaxBytes) return;
  HistEvent ev;
  history(hist_, &ev, H_ENTER, std::string(entry).c_str());
  if (history_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(history_.parent_path(), ec);
  if (ec) {
    warn("could not create " + history_.parent_path().string() + ": " + ec.message());
  } else if (history(hist_, &ev, H_SAVE, history_.c_str()) < 0) {
    warn("could not write the history file " + history_.string());
  }
}

}  // namespace infer::cli
