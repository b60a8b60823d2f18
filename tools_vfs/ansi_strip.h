// AnsiStripper: turns a terminal's byte stream into plain text for the model (docs/TOOLS.md,
// "PTYs"). Escape sequences (CSI, OSC, DCS/SOS/PM/APC strings, charset selections and the other
// ESC forms) are removed; the current line is kept as a terminal would show it: '\r' returns to
// its start and later characters overwrite (a progress bar's redraws collapse to the last one),
// '\b' and cursor moves along the line move the cursor, erase-in-line erases. A line is emitted
// when it ends ('\n', or a move to another row), without its trailing blanks. It is streaming:
// a sequence split across two feeds is handled as if it came whole. Bounded: the line and any
// sequence have a maximum length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace infer::tools {

class AnsiStripper {
 public:
  // A line reaching max_line_bytes is emitted as if it had ended (a soft wrap).
  explicit AnsiStripper(size_t max_line_bytes = 4096) : max_line_bytes_(max_line_bytes) {}

  // Feeds raw bytes; appends every completed line (with its '\n') to OUT.
  void feed(std::string_view bytes, std::string& out);

  // The line being written, not yet ended (a prompt, a progress bar): what the screen shows.
  const std::string& current_line() const { return line_; }

  // Whether the program asked for application cursor keys (DECCKM, CSI ?1h): arrows are then
  // sent as ESC O A rather than ESC [ A.
  bool application_cursor_keys() const { return app_cursor_keys_; }

 private:
  // kString: an OSC, DCS, SOS, PM or APC body, skipped up to BEL or ST (ESC \\).
  enum class State : uint8_t { kGround, kEsc, kEscIntermediate, kCsi, kString, kStringEsc };

  void ground_byte(unsigned char c, std::string& out);
  void put_char(std::string_view ch, std::string& out);
  void end_line(std::string& out);
  void csi_final(unsigned char final_byte, std::string& out);
  size_t column_of_cursor() const;
  // The byte index of COLUMN; past the end, the line's end, padded with spaces up to it if PAD.
  size_t byte_of_column(size_t column, bool pad);
  size_t char_bytes_at(size_t byte) const;
  size_t csi_param(size_t index, size_t fallback) const;

  State state_ = State::kGround;
  std::string line_;
  size_t cursor_ = 0;  // byte index in line_, always on a character's first byte
  std::string csi_;    // a CSI sequence's parameter and intermediate bytes
  size_t seq_bytes_ = 0;
  std::string utf8_;  // a character's bytes, the lead byte seen, continuation bytes pending
  size_t utf8_need_ = 0;
  bool app_cursor_keys_ = false;
  size_t max_line_bytes_;
};

}  // namespace infer::tools
