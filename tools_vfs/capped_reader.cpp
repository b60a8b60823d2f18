// CappedReader: sniff the head for binary, read one chunk through Vfs::read, then cut it at a
// UTF-8 boundary, at the token cap and at a nearby line end (docs/TOOLS.md).
#include "tools_vfs/capped_reader.h"

#include <algorithm>

#include "tools_vfs/binary_sniff.h"
#include "tools_vfs/path_rules.h"
#include "tools_vfs/utf8_cut.h"

namespace infer::tools {
namespace {

std::string quoted(std::string_view path) {
  std::string out = printable_path(path);
  out.insert(out.begin(), '"');
  out.push_back('"');
  return out;
}

// The last line end in BYTES[cut - window, cut) with window = min(window_bytes, cut / 2), so a
// chunk never shrinks to less than half of what the caps allowed; the cut just after it, or CUT.
size_t line_cut(std::string_view bytes, size_t cut, size_t window_bytes) {
  const size_t window = std::min(window_bytes, cut / 2);
  for (size_t i = cut; i > cut - window; --i) {
    if (bytes[i - 1] == '\n') return i;
  }
  return cut;
}

}  // namespace

const char* chunk_end_name(ChunkEnd end) {
  switch (end) {
    case ChunkEnd::kEndOfFile:
      return "end of file";
    case ChunkEnd::kLineEnd:
      return "line end";
    case ChunkEnd::kByteCap:
      return "byte cap";
    case ChunkEnd::kTokenCap:
      return "token cap";
  }
  return "?";
}

Result<CappedReader> CappedReader::create(const Vfs& vfs, TokenCounter count, ReaderLimits limits) {
  const size_t max_read = vfs.limits().max_read_bytes;
  if (!count) return make_error(ErrorCode::kInvalidArgument, "capped reader: no token counter");
  if (limits.max_chunk_bytes < 4 || limits.max_chunk_bytes > max_read) {
    return make_error(ErrorCode::kInvalidArgument,
                      "capped reader: max_chunk_bytes " + std::to_string(limits.max_chunk_bytes) +
                          " is outside [4, " + std::to_string(max_read) + "]");
  }
  if (limits.max_chunk_tokens == 0) {
    return make_error(ErrorCode::kInvalidArgument, "capped reader: max_chunk_tokens is 0");
  }
  if (limits.sniff_bytes == 0 || limits.sniff_bytes > max_read) {
    return make_error(ErrorCode::kInvalidArgument,
                      "capped reader: sniff_bytes " + std::to_string(limits.sniff_bytes) +
                          " is outside [1, " + std::to_string(max_read) + "]");
  }
  return CappedReader(vfs, std::move(count), limits);
}

size_t CappedReader::token_cut(std::string_view bytes, size_t cut) const {
  // Binary search over character boundaries: LO fits (0 always does), HI does not. Counts
  // grow with the prefix for any tokenizer worth the name; if one does not, the search still
  // ends on a prefix it measured within the cap.
  size_t lo = 0;
  size_t hi = cut;
  while (true) {
    size_t mid = utf8_cut_before(bytes, lo + (hi - lo) / 2, true);
    if (mid <= lo) mid = lo + utf8_char_len(bytes, lo);
    if (mid >= hi) break;
    if (count_(bytes.substr(0, mid)) <= limits_.max_chunk_tokens) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  // One character over the cap alone still goes, so that every read makes progress.
  return lo > 0 ? lo : utf8_char_len(bytes, 0);
}

Result<FileChunk> CappedReader::read(std::string_view path, uint64_t offset) const {
  FileChunk out;
  out.path = std::string(path);
  out.offset = offset;
  out.next_offset = offset;

  // The head decides for the whole file, whatever OFFSET is asked for.
  INFER_TRY(ReadChunk head, vfs_->read(path, 0, limits_.sniff_bytes));
  if (SniffResult sniff = sniff_binary(head.bytes); sniff.binary) {
    out.file_size_bytes = head.file_size_bytes;
    out.eof = true;
    out.binary = BinaryFile{std::move(sniff.kind), std::move(sniff.reason)};
    return out;
  }

  INFER_TRY(ReadChunk raw, vfs_->read(path, offset, limits_.max_chunk_bytes));
  out.file_size_bytes = raw.file_size_bytes;
  if (raw.bytes.empty() && offset > raw.file_size_bytes) {
    return make_error(ErrorCode::kInvalidArgument,
                      "read " + quoted(path) + ": offset " + std::to_string(offset) +
                          " is past the end of the file (" + std::to_string(raw.file_size_bytes) +
                          " bytes now; it may have changed since the last chunk)");
  }
  const std::string_view bytes = raw.bytes;
  const bool more_follows = !raw.eof;

  size_t cut = utf8_cut_before(bytes, bytes.size(), more_follows);
  ChunkEnd end = more_follows ? ChunkEnd::kByteCap : ChunkEnd::kEndOfFile;
  if (cut < bytes.size()) end = ChunkEnd::kByteCap;
  size_t n_tokens = cut > 0 ? count_(bytes.substr(0, cut)) : 0;
  if (n_tokens > limits_.max_chunk_tokens) {
    cut = token_cut(bytes, cut);
    end = ChunkEnd::kTokenCap;
    n_tokens = count_(bytes.substr(0, cut));
  }
  if (end != ChunkEnd::kEndOfFile) {
    const size_t at_line = line_cut(bytes, cut, limits_.line_window_bytes);
    if (at_line < cut) {
      cut = at_line;
      end = ChunkEnd::kLineEnd;
      n_tokens = count_(bytes.substr(0, cut));
    }
  }

  out.text.assign(bytes.substr(0, cut));
  out.n_tokens = n_tokens;
  out.end = end;
  out.next_offset = offset + cut;
  out.eof = end == ChunkEnd::kEndOfFile;
  out.bytes_left =
      out.file_size_bytes > out.next_offset ? out.file_size_bytes - out.next_offset : 0;
  return out;
}

std::string render_chunk(const FileChunk& chunk) {
  const std::string name = quoted(chunk.path);
  const std::string size = std::to_string(chunk.file_size_bytes) + " bytes";
  if (chunk.binary) {
    const std::string kind =
        chunk.binary->kind.empty() ? "of unknown kind" : "looks like " + chunk.binary->kind;
    return "[file " + name + ": binary, " + size + ", " + kind + " (" + chunk.binary->reason +
           "); not shown]\n";
  }
  if (chunk.file_size_bytes == 0 && chunk.text.empty() && chunk.eof) {
    return "[file " + name + ": empty]\n";
  }
  std::string out = "[file " + name + ": " + std::to_string(chunk.text.size()) +
                    " bytes from offset " + std::to_string(chunk.offset) + " of " + size + ", " +
                    std::to_string(chunk.n_tokens) + " tokens]\n";
  out += chunk.text;
  if (!chunk.text.empty() && chunk.text.back() != '\n') out += '\n';
  if (chunk.eof) {
    out += "[end of file]\n";
  } else if (chunk.bytes_left > 0) {
    out += "[" + std::to_string(chunk.bytes_left) + " bytes left: continue at offset " +
           std::to_string(chunk.next_offset) + "]\n";
  } else {
    // A file whose size says nothing (procfs) or that grew while it was read.
    out += "[more may follow: continue at offset " + std::to_string(chunk.next_offset) + "]\n";
  }
  return out;
}

}  // namespace infer::tools
