// Fuzz target for the PTY text view's ANSI/CR stripper (tools_vfs/ansi_strip.cpp): any bytes, fed
// whole and cut in two at a place the input picks. It must not crash, must leave no ESC in the
// text, must keep the unfinished line within its limit, and must give the same text either way.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tools_vfs/ansi_strip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t max_line = 8 + data[0] % 120;  // small lines reach the limits often
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t cut = bytes.empty() ? 0 : data[0] % (bytes.size() + 1);

  infer::tools::AnsiStripper whole(max_line), split(max_line);
  std::string out_whole, out_split;
  whole.feed(bytes, out_whole);
  split.feed(bytes.substr(0, cut), out_split);
  split.feed(bytes.substr(cut), out_split);

  if (out_whole != out_split || whole.current_line() != split.current_line()) std::abort();
  if (out_whole.find('\x1b') != std::string::npos) std::abort();
  if (whole.current_line().find('\x1b') != std::string::npos) std::abort();
  if (whole.current_line().size() > max_line) std::abort();
  return 0;
}
