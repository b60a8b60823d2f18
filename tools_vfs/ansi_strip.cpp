// AnsiStripper: a streaming state machine after the VT500 parser (vt100.net/emu/dec_ansi_parser),
// reduced to what plain text needs: one line of cells, a cursor, and sequences skipped.
#include "tools_vfs/ansi_strip.h"

#include <algorithm>

namespace infer::tools {
namespace {

constexpr unsigned char kEsc = 0x1b;
constexpr unsigned char kCan = 0x18;  // CAN and SUB cancel a sequence in progress
constexpr unsigned char kSub = 0x1a;
constexpr unsigned char kBel = 0x07;
constexpr size_t kMaxCsiBytes = 64;        // longer parameter lists are abandoned
constexpr size_t kMaxStringBytes = 4096;   // an unterminated OSC/DCS cannot swallow all output
constexpr size_t kMaxCsiParam = 10000;     // a cursor move of 999999 columns is cut to this

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

}  // namespace

void AnsiStripper::feed(std::string_view bytes, std::string& out) {
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (state_ != State::kGround && (c == kCan || c == kSub)) {
      state_ = State::kGround;
      continue;
    }
    switch (state_) {
      case State::kGround:
        ground_byte(c, out);
        break;
      case State::kEsc:
        if (c == '[') {
          state_ = State::kCsi;
          csi_.clear();
        } else if (c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_') {
          state_ = State::kString;  // OSC, DCS, SOS, PM, APC
          seq_bytes_ = 0;
        } else if (c >= 0x20 && c <= 0x2f) {
          state_ = State::kEscIntermediate;  // ESC ( B (charset), ESC # 8, ESC % G ...
          seq_bytes_ = 0;
        } else if (c == kEsc) {
          // ESC ESC: the first is dropped, the second starts a sequence
        } else if (c < 0x20) {
          state_ = State::kGround;  // a control in the middle: executed, the ESC dropped
          ground_byte(c, out);
        } else {
          state_ = State::kGround;
          // IND, NEL and RI move to another row; RIS resets the screen: the line ends
          if ((c == 'D' || c == 'E' || c == 'M' || c == 'c') && !line_.empty()) end_line(out);
          if (c == 'E') cursor_ = 0;
        }
        break;
      case State::kEscIntermediate:
        if (c >= 0x20 && c <= 0x2f && ++seq_bytes_ < kMaxCsiBytes) break;
        state_ = State::kGround;
        if (c < 0x20 || c > 0x7e) ground_byte(c, out);  // not a final byte: not swallowed
        break;
      case State::kCsi:
        if (c >= 0x40 && c <= 0x7e) {
          state_ = State::kGround;
          csi_final(c, out);
        } else if (c >= 0x20 && c <= 0x3f) {
          if (csi_.size() >= kMaxCsiBytes) {
            state_ = State::kGround;
          } else {
            csi_.push_back(char(c));
          }
        } else if (c == kEsc) {
          state_ = State::kEsc;
        } else if (c < 0x20) {
          ground_byte(c, out);  // C0 controls inside CSI are executed (VT100 does)
        } else {
          state_ = State::kGround;  // a byte no CSI holds: the sequence is malformed, dropped
        }
        break;
      case State::kString:
        if (c == kBel) {
          state_ = State::kGround;
        } else if (c == kEsc) {
          state_ = State::kStringEsc;
        } else if (++seq_bytes_ > kMaxStringBytes) {
          state_ = State::kGround;
        }
        break;
      case State::kStringEsc:
        if (c == '\\') {
          state_ = State::kGround;  // ST
        } else {
          state_ = State::kEsc;  // the ESC started a new sequence; the string is over
          feed(std::string_view(&ch, 1), out);
        }
        break;
    }
  }
}

void AnsiStripper::ground_byte(unsigned char c, std::string& out) {
  if (utf8_need_ > 0) {
    if (is_continuation(c)) {
      utf8_.push_back(char(c));
      if (--utf8_need_ == 0) put_char(utf8_, out);
      return;
    }
    utf8_need_ = 0;
    put_char(utf8_, out);  // a broken character: its bytes kept as they came
  }
  if (c == kEsc) {
    state_ = State::kEsc;
  } else if (c == '\n' || c == '\v' || c == '\f') {
    end_line(out);
  } else if (c == '\r') {
    cursor_ = 0;
  } else if (c == '\b') {
    if (cursor_ > 0) --cursor_;
    while (cursor_ > 0 && is_continuation(static_cast<unsigned char>(line_[cursor_]))) --cursor_;
  } else if (c == '\t') {
    put_char("\t", out);
  } else if (c < 0x20 || c == 0x7f) {
    // BEL, NUL, SI/SO and the other controls show nothing
  } else if (c >= 0xc0 && c < 0xf8) {
    utf8_.assign(1, char(c));
    utf8_need_ = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
  } else {
    const char b = char(c);
    put_char(std::string_view(&b, 1), out);
  }
}

size_t AnsiStripper::char_bytes_at(size_t byte) const {
  size_t end = byte + 1;
  while (end < line_.size() && is_continuation(static_cast<unsigned char>(line_[end]))) ++end;
  return std::min(end, line_.size()) - byte;
}

void AnsiStripper::put_char(std::string_view ch, std::string& out) {
  if (cursor_ >= line_.size()) {
    line_.append(ch);
  } else {
    line_.replace(cursor_, char_bytes_at(cursor_), ch);  // overwrite, as the screen does
  }
  cursor_ += ch.size();
  if (line_.size() >= max_line_bytes_) end_line(out);
}

void AnsiStripper::end_line(std::string& out) {
  // Blanks at the end of a row are not seen on a screen; erasures leave them (ESC[2K, "\b \b").
  const size_t last = line_.find_last_not_of(' ');
  out.append(line_, 0, last == std::string::npos ? 0 : last + 1);
  out.push_back('\n');
  line_.clear();
  cursor_ = 0;
}

size_t AnsiStripper::column_of_cursor() const {
  size_t col = 0;
  for (size_t i = 0; i < cursor_ && i < line_.size(); ++i) {
    if (!is_continuation(static_cast<unsigned char>(line_[i]))) ++col;
  }
  return col;
}

size_t AnsiStripper::byte_of_column(size_t column, bool pad) {
  column = std::min(column, max_line_bytes_ - 1);
  size_t col = 0;
  for (size_t i = 0; i < line_.size(); ++i) {
    if (is_continuation(static_cast<unsigned char>(line_[i]))) continue;
    if (col == column) return i;
    ++col;
  }
  if (pad) line_.append(column - col, ' ');
  return line_.size();
}

size_t AnsiStripper::csi_param(size_t index, size_t fallback) const {
  size_t i = 0;
  size_t pos = 0;
  while (i < index) {
    pos = csi_.find(';', pos);
    if (pos == std::string::npos) return fallback;
    ++pos;
    ++i;
  }
  size_t value = 0;
  bool any = false;
  for (; pos < csi_.size() && csi_[pos] >= '0' && csi_[pos] <= '9'; ++pos) {
    value = std::min(value * 10 + size_t(csi_[pos] - '0'), kMaxCsiParam);
    any = true;
  }
  return any ? value : fallback;
}

void AnsiStripper::csi_final(unsigned char final_byte, std::string& out) {
  if (!csi_.empty() && csi_[0] == '?') {  // DEC private modes: only DECCKM (mode 1) matters
    if (final_byte == 'h' || final_byte == 'l') {
      std::string_view modes = std::string_view(csi_).substr(1);
      while (!modes.empty()) {
        const size_t semi = modes.find(';');
        if (modes.substr(0, semi) == "1") app_cursor_keys_ = final_byte == 'h';
        modes = semi == std::string_view::npos ? std::string_view() : modes.substr(semi + 1);
      }
    }
    return;
  }
  if (!csi_.empty() && (csi_[0] < '0' || csi_[0] > ';')) return;  // '>', '<', '=': not cursor
  if (csi_.find_first_of(" !\"#$%&'()*+,-./") != std::string::npos) return;  // intermediates
  const size_t n = std::max<size_t>(csi_param(0, 1), 1);
  switch (final_byte) {
    case 'C':  // cursor forward
    case 'a':
      cursor_ = byte_of_column(column_of_cursor() + n, true);
      break;
    case 'D': {  // cursor back
      const size_t col = column_of_cursor();
      cursor_ = byte_of_column(col > n ? col - n : 0, true);
      break;
    }
    case 'G':  // cursor to column n (1-based)
    case '`':
      cursor_ = byte_of_column(n - 1, true);
      break;
    case 'K': {  // erase in line: 0 to the end, 1 to the start, 2 all
      const size_t mode = csi_param(0, 0);
      const size_t col = column_of_cursor();
      if (mode == 0) {
        line_.resize(std::min(cursor_, line_.size()));
      } else {
        const size_t after = mode == 1 && cursor_ < line_.size() ? cursor_ + char_bytes_at(cursor_)
                                                                  : line_.size();
        line_.replace(0, after, std::string(mode == 1 ? col + 1 : col, ' '));
        if (mode == 2) line_.resize(col);
        cursor_ = col;
      }
      break;
    }
    case 'P': {  // delete n characters at the cursor, the rest shifts left
      const size_t to = byte_of_column(column_of_cursor() + n, false);
      if (cursor_ < line_.size()) line_.erase(cursor_, to - cursor_);
      break;
    }
    case '@':  // insert n blanks at the cursor
      if (cursor_ < line_.size()) line_.insert(cursor_, std::min(n, max_line_bytes_), ' ');
      break;
    case 'X': {  // erase n characters (to blanks), the cursor stays
      size_t at = cursor_;
      for (size_t i = 0; i < n && at < line_.size(); ++i) {
        line_.erase(at + 1, char_bytes_at(at) - 1);  // a character becomes one blank
        line_[at++] = ' ';
      }
      break;
    }
    case 'A': case 'B': case 'E': case 'F': case 'H': case 'f': case 'd':
      // a move to another row: the line the cursor leaves is what that row shows
      if (!line_.empty()) end_line(out);
      cursor_ = 0;
      break;
    default:
      break;  // SGR (colours), erase in display, scrolling, modes: nothing to show
  }
  if (line_.size() > max_line_bytes_) {  // padding or inserted blanks past the limit
    line_.resize(max_line_bytes_);
    cursor_ = std::min(cursor_, line_.size());
  }
}

}  // namespace infer::tools
