// The REPL's terminal input below the line editor: bytes from a file descriptor decoded as UTF-8
// characters, and bracketed pastes (ESC[200~ ... ESC[201~, xterm's convention) caught whole, so
// that pasted newlines do not end the line and a paste has no length limit.
#pragma once

#include <signal.h>

#include <string>
#include <string_view>

namespace infer::cli {

struct Key {
  enum class Kind { kChar, kPaste, kInterrupted, kEof };
  Kind kind = Kind::kEof;
  char32_t ch = 0;    // kChar: the character (U+FFFD for a byte that is not UTF-8)
  std::string paste;  // kPaste: the pasted bytes, line ends ("\r\n", "\r") made "\n"
};

class KeyReader {
 public:
  // `interrupted` is the flag a SIGINT handler sets: while it is set, or when it gets set while
  // waiting for input, next() returns kInterrupted (and clears it).
  KeyReader(int fd, volatile sig_atomic_t* interrupted) : fd_(fd), interrupted_(interrupted) {}
  Key next();

 private:
  enum class Fill { kData, kEof, kTimeout, kInterrupted };
  // Reads what is there (waits up to timeout_ms; -1: no limit) and appends it to buf_.
  Fill fill(int timeout_ms);
  Key paste();
  char32_t utf8_char();

  int fd_;
  volatile sig_atomic_t* interrupted_;
  std::string buf_;  // bytes read and not yet returned, from pos_
  size_t pos_ = 0;
};

// UTF-8 to characters; a byte that starts no valid sequence becomes U+FFFD.
std::u32string decode_utf8(std::string_view s);

}  // namespace infer::cli
