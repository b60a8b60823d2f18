// CappedReader: feeds a file beneath ROOT into the model's context in chunks bounded in bytes
// and in tokens (docs/TOOLS.md, "The capped reader"). Each chunk ends on a UTF-8 boundary,
// preferably at a line end near the cap, and says where the next one starts and how much is
// left; binary files are described (size, a guess of the kind), never streamed. Tokens are
// counted by a callback the caller supplies, so tools_vfs needs no tokenizer.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "tools_vfs/vfs.h"

namespace infer::tools {

// Tokens TEXT would take in the context (the engine passes its tokenizer's count).
using TokenCounter = std::function<size_t(std::string_view text)>;

struct ReaderLimits {
  size_t max_chunk_bytes = size_t(16) << 10;  // at least 4 (one UTF-8 character), at most the
                                              // VFS's max_read_bytes
  size_t max_chunk_tokens = 4096;             // at least 1
  size_t line_window_bytes = 1024;  // a line end this close to the cap (and in the chunk's
                                    // second half) ends the chunk there instead
  size_t sniff_bytes = 8192;        // the head of the file checked for binary content
};

// Why a chunk ends where it does.
enum class ChunkEnd {
  kEndOfFile,  // it reaches the end of the file (as of this read)
  kLineEnd,    // a line end near the cap
  kByteCap,    // max_chunk_bytes (less a UTF-8 sequence the cap would cut)
  kTokenCap,   // max_chunk_tokens
};
const char* chunk_end_name(ChunkEnd end);

struct BinaryFile {
  std::string kind;    // "PNG image", ..., or "" when no signature matched
  std::string reason;  // why it is binary ("a NUL byte at offset 3")
};

struct FileChunk {
  std::string path;              // as asked, relative to ROOT
  std::string text;              // the file's bytes [offset, next_offset), as they are
  uint64_t offset = 0;           // where text starts
  uint64_t next_offset = 0;      // where the next chunk starts (offset + text.size())
  uint64_t file_size_bytes = 0;  // the file's size at this read
  uint64_t bytes_left = 0;       // file_size_bytes - next_offset, 0 past the end
  size_t n_tokens = 0;           // text by the counter
  ChunkEnd end = ChunkEnd::kEndOfFile;
  bool eof = false;                  // nothing follows next_offset (as of this read)
  std::optional<BinaryFile> binary;  // set: not streamed, text is empty
};

// What the model reads: a header line naming the file and the byte range, the text, and a
// footer saying how many bytes are left and the offset to continue from (or "end of file").
// A binary file gets one line: its size, the guessed kind and why it is not shown.
std::string render_chunk(const FileChunk& chunk);

class CappedReader {
 public:
  // VFS must outlive the reader. Refuses limits outside the bounds above or a null counter.
  static Result<CappedReader> create(const Vfs& vfs, TokenCounter count, ReaderLimits limits = {});

  // The chunk of PATH starting at OFFSET (a chunk's next_offset continues it byte for byte).
  // An offset past the end of the file is an error naming the file's size (it may have shrunk).
  Result<FileChunk> read(std::string_view path, uint64_t offset) const;

  const ReaderLimits& limits() const { return limits_; }

 private:
  CappedReader(const Vfs& vfs, TokenCounter count, ReaderLimits limits)
      : vfs_(&vfs), count_(std::move(count)), limits_(limits) {}
  // The longest prefix of BYTES[0, cut) on a character boundary within max_chunk_tokens.
  size_t token_cut(std::string_view bytes, size_t cut) const;

  const Vfs* vfs_;
  TokenCounter count_;
  ReaderLimits limits_;
};

}  // namespace infer::tools
