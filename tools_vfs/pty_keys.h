// Named keys for PTY writes: what a terminal sends for Ctrl-C, Enter, the arrows... The names are
// what a model or a client writes ("ctrl-c", "enter", "up"); the bytes follow xterm.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace infer::tools {

// The bytes of key NAME (case-insensitive): "enter" (CR, as a terminal sends it), "tab",
// "esc"/"escape", "backspace" (DEL), "space", "up" "down" "left" "right", "home", "end",
// "pageup", "pagedown", "insert", "delete", "f1".."f12", and "ctrl-X" / "c-X" / "^X" for a
// letter or one of @[\]^_ (ctrl-c is ETX, ctrl-d EOT, ctrl-z SUB, ctrl-\ FS). Arrows, home and
// end take the application form (ESC O A) when APP_CURSOR_KEYS is set (the program asked for it
// with DECCKM, as less and vim do). An unknown name is an error listing the known ones.
Result<std::string> key_bytes(std::string_view name, bool app_cursor_keys = false);

}  // namespace infer::tools
