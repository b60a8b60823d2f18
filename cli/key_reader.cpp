// Decodes terminal input: UTF-8 characters, and bracketed pastes as one Key.
#include "cli/key_reader.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

namespace infer::cli {
namespace {

constexpr std::string_view kPasteStart = "\x1b[200~";
constexpr std::string_view kPasteEnd = "\x1b[201~";
// How long the rest of an escape sequence may take after its ESC: a terminal writes a sequence
// at once, so this only delays a lone ESC (emacs mode's Meta prefix).
constexpr int kEscapeWaitMs = 50;
constexpr char32_t kReplacement = 0xFFFD;

// The length of the UTF-8 sequence `lead` starts, 0 if it starts none.
size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// The character of the complete sequence s[0, n), or kReplacement when it is not valid UTF-8.
char32_t decode_sequence(std::string_view s, size_t n) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  if (n == 1) return b(0);
  char32_t c = b(0) & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xC0) != 0x80) return kReplacement;
    c = (c << 6) | (b(i) & 0x3F);
  }
  const char32_t min = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return kReplacement;
  return c;
}

std::string normalize_line_ends(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = sequence_length(static_cast<unsigned char>(s[i]));
    if (n == 0 || i + n > s.size()) {
      out += kReplacement;
      ++i;
      continue;
    }
    const char32_t c = decode_sequence(s.substr(i), n);
    out += c;
    i += c == kReplacement ? 1 : n;
  }
  return out;
}

KeyReader::Fill KeyReader::fill(int timeout_ms) {
  if (pos_ > 0) {  // keep buf_ from growing over a session
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  // SIGINT stays blocked except inside ppoll, so a Ctrl-C that comes between the flag's check
  // and the wait still breaks the wait.
  sigset_t sigint, unblocked;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigint, &unblocked);
  sigdelset(&unblocked, SIGINT);
  const timespec wait{timeout_ms / 1000, long(timeout_ms % 1000) * 1000000};
  Fill result = Fill::kEof;
  for (;;) {
    if (*interrupted_) {
      *interrupted_ = 0;
      result = Fill::kInterrupted;
      break;
    }
    pollfd p{fd_, POLLIN, 0};
    const int ready = ppoll(&p, 1, timeout_ms < 0 ? nullptr : &wait, &unblocked);
    if (ready == 0) {
      result = Fill::kTimeout;
      break;
    }
    if (ready > 0) {
      char chunk[4096];
      const ssize_t n = read(fd_, chunk, sizeof chunk);
      if (n > 0) buf_.append(chunk, size_t(n));
      if (n >= 0) {
        result = n > 0 ? Fill::kData : Fill::kEof;
        break;
      }
    }
    if (errno != EINTR && errno != EAGAIN) break;  // a terminal that went away: the end
  }
  pthread_sigmask(SIG_SETMASK, &unblocked, nullptr);
  return result;
}

Key KeyReader::next() {
  if (pos_ == buf_.size()) {
    switch (fill(-1)) {
      case Fill::kInterrupted:
        return {Key::Kind::kInterrupted, 0, {}};
      case Fill::kData:
        break;
      default:
        return {Key::Kind::kEof, 0, {}};
    }
  }
  if (buf_[pos_] == '\x1b') {
    // Wait for as much of ESC[200~ as this input could be the start of.
    while (buf_.size() - pos_ < kPasteStart.size() &&
           kPasteStart.starts_with(std::string_view(buf_).substr(pos_))) {
      const Fill f = fill(kEscapeWaitMs);
      if (f == Fill::kInterrupted) return {Key::Kind::kInterrupted, 0, {}};
      if (f != Fill::kData) break;
    }
    if (std::string_view(buf_).substr(pos_).starts_with(kPasteStart)) {
      pos_ += kPasteStart.size();
      return paste();
    }
  }
  return {Key::Kind::kChar, utf8_char(), {}};
}

Key KeyReader::paste() {
  size_t searched = pos_;  // kPasteEnd starts at or after this
  for (;;) {
    if (const size_t end = buf_.find(kPasteEnd, searched); end != std::string::npos) {
      Key k{Key::Kind::kPaste, 0,
            normalize_line_ends(std::string_view(buf_).substr(pos_, end - pos_))};
      pos_ = end + kPasteEnd.size();
      return k;
    }
    searched = buf_.size() >= kPasteEnd.size() ? buf_.size() - kPasteEnd.size() + 1 : 0;
    searched = std::max(searched, pos_);
    const size_t before = pos_;
    const Fill f = fill(-1);
    searched -= before - pos_;  // fill() may have moved the bytes down
    if (f == Fill::kInterrupted) return {Key::Kind::kInterrupted, 0, {}};
    if (f != Fill::kData) {  // the input ended inside the paste: what came is the paste
      Key k{Key::Kind::kPaste, 0, normalize_line_ends(std::string_view(buf_).substr(pos_))};
      pos_ = buf_.size();
      return k;
    }
  }
}

char32_t KeyReader::utf8_char() {
  const size_t n = sequence_length(static_cast<unsigned char>(buf_[pos_]));
  if (n == 0) {
    ++pos_;
    return kReplacement;
  }
  while (buf_.size() - pos_ < n) {
    if (fill(kEscapeWaitMs) != Fill::kData) break;
  }
  if (buf_.size() - pos_ < n) {
    ++pos_;
    return kReplacement;
  }
  const char32_t c = decode_sequence(std::string_view(buf_).substr(pos_), n);
  pos_ += c == kReplacement ? 1 : n;
  return c;
}

}  // namespace infer::cli
