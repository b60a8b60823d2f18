// Key names to the bytes xterm sends for them (xterm's ctlseqs, "PC-Style Function Keys").
#include "tools_vfs/pty_keys.h"

#include <array>
#include <cctype>

namespace infer::tools {
namespace {

struct NamedKey {
  std::string_view name;
  std::string_view bytes;
};

// Keys whose bytes do not depend on the cursor-key mode.
constexpr std::array<NamedKey, 26> kKeys{{
    {"enter", "\r"},        {"return", "\r"},        {"tab", "\t"},
    {"esc", "\x1b"},        {"escape", "\x1b"},      {"backspace", "\x7f"},
    {"space", " "},         {"pageup", "\x1b[5~"},   {"pagedown", "\x1b[6~"},
    {"insert", "\x1b[2~"},  {"delete", "\x1b[3~"},   {"f1", "\x1bOP"},
    {"f2", "\x1bOQ"},       {"f3", "\x1bOR"},        {"f4", "\x1bOS"},
    {"f5", "\x1b[15~"},     {"f6", "\x1b[17~"},      {"f7", "\x1b[18~"},
    {"f8", "\x1b[19~"},     {"f9", "\x1b[20~"},      {"f10", "\x1b[21~"},
    {"f11", "\x1b[23~"},    {"f12", "\x1b[24~"},     {"backtab", "\x1b[Z"},
    {"nul", std::string_view("\0", 1)}, {"del", "\x7f"},
}};

// Cursor keys: the final byte after ESC [ (normal mode) or ESC O (application mode).
constexpr std::array<NamedKey, 6> kCursorKeys{{
    {"up", "A"}, {"down", "B"}, {"right", "C"}, {"left", "D"}, {"home", "H"}, {"end", "F"},
}};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

Result<std::string> key_bytes(std::string_view name, bool app_cursor_keys) {
  const std::string key = lower(name);
  for (const NamedKey& k : kKeys) {
    if (key == k.name) return std::string(k.bytes);
  }
  for (const NamedKey& k : kCursorKeys) {
    if (key == k.name) return std::string(app_cursor_keys ? "\x1bO" : "\x1b[") + std::string(k.bytes);
  }
  std::string_view ctrl;
  for (std::string_view prefix : {"ctrl-", "ctrl+", "c-", "^"}) {
    if (key.size() == prefix.size() + 1 && key.compare(0, prefix.size(), prefix) == 0) {
      ctrl = std::string_view(key).substr(prefix.size());
    }
  }
  if (!ctrl.empty()) {
    const char c = ctrl[0];
    if (c >= 'a' && c <= 'z') return std::string(1, char(c - 'a' + 1));
    if (c == '@' || c == ' ') return std::string(1, '\0');
    if (c >= '[' && c <= '_') return std::string(1, char(c - '[' + 0x1b));
    if (c == '?') return std::string("\x7f");
  }
  std::string known = "enter, tab, esc, backspace, space, up, down, left, right, home, end, pageup, "
                      "pagedown, insert, delete, backtab, f1..f12, ctrl-a..ctrl-z, ctrl-@ [ \\ ] ^ _";
  std::string shown;
  for (const char c : name.substr(0, 40)) {
    shown += std::isprint(static_cast<unsigned char>(c)) ? std::string(1, c) : std::string("?");
  }
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown key \"" + shown + "\" (known: " + known + ")");
}

}  // namespace infer::tools
