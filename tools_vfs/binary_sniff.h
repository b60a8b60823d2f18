// Is the start of a file text the model can read, or binary to be described instead? A NUL
// byte, a known binary signature, or mostly invalid UTF-8 in the first KiBs says binary; the
// signature (magic bytes) also names a guess of the kind ("PNG image", "ELF executable").
#pragma once

#include <string>
#include <string_view>

namespace infer::tools {

struct SniffResult {
  bool binary = false;
  std::string kind;    // a guess by magic bytes ("gzip compressed data"), "" when none matched
  std::string reason;  // why it is binary: "a NUL byte at offset 12", "magic bytes", ...
};

// HEAD: the first bytes of the file (the reader passes up to ReaderLimits::sniff_bytes).
// Text stays text with a few invalid bytes (Latin-1 in a UTF-8 file): binary needs more than
// kMaxInvalidUtf8Percent of HEAD's bytes in invalid sequences.
inline constexpr size_t kMaxInvalidUtf8Percent = 30;
SniffResult sniff_binary(std::string_view head);

// The kind guessed from magic bytes alone, "" for none (also for text formats).
std::string guess_kind(std::string_view head);

}  // namespace infer::tools
