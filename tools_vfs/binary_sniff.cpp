// sniff_binary and guess_kind: a table of magic bytes, a NUL scan and a UTF-8 validity count.
#include "tools_vfs/binary_sniff.h"

#include <array>
#include <cstdint>

#include "tools_vfs/utf8_cut.h"

namespace infer::tools {
namespace {

struct Magic {
  size_t at;               // offset of the signature in the file
  std::string_view bytes;  // the signature
  const char* kind;
};

using namespace std::string_view_literals;

// Signatures from the formats' specifications (as file(1)'s magic database has them); the
// order matters only where one is a prefix of another (none here).
constexpr std::array kMagic = {
    Magic{0, "\x89PNG\r\n\x1a\n"sv, "PNG image"},
    Magic{0, "\xff\xd8\xff"sv, "JPEG image"},
    Magic{0, "GIF87a"sv, "GIF image"},
    Magic{0, "GIF89a"sv, "GIF image"},
    Magic{0, "%PDF-"sv, "PDF document"},
    Magic{0, "PK\x03\x04"sv, "ZIP archive (also jar, docx, xlsx, wheel)"},
    Magic{0, "PK\x05\x06"sv, "ZIP archive (empty)"},
    Magic{0, "\x1f\x8b"sv, "gzip compressed data"},
    Magic{0, "BZh"sv, "bzip2 compressed data"},
    Magic{0, "\3757zXZ\0"sv, "xz compressed data"},  // octal: \xfd7 would be one escape
    Magic{0, "\x28\xb5\x2f\xfd"sv, "zstd compressed data"},
    Magic{0, "7z\xbc\xaf\x27\x1c"sv, "7-zip archive"},
    Magic{257, "ustar"sv, "tar archive"},
    Magic{0, "\177ELF"sv, "ELF executable or object"},
    Magic{0, "MZ"sv, "DOS/Windows executable"},
    Magic{0, "\xca\xfe\xba\xbe"sv, "Java class or Mach-O universal binary"},
    Magic{0, "\xcf\xfa\xed\xfe"sv, "Mach-O 64-bit binary"},
    Magic{0, "\0asm"sv, "WebAssembly module"},
    Magic{0, "SQLite format 3\x00"sv, "SQLite database"},
    Magic{0, "GGUF"sv, "GGUF model file"},
    Magic{0, "RIFF"sv, "RIFF container (WAV, AVI or WebP)"},
    Magic{0, "OggS"sv, "Ogg media"},
    Magic{0, "ID3"sv, "MP3 audio"},
    Magic{0, "fLaC"sv, "FLAC audio"},
    Magic{4, "ftyp"sv, "MP4/QuickTime media"},
    Magic{0, "\x1a\x45\xdf\xa3"sv, "Matroska/WebM media"},
    Magic{0, "\x93NUMPY"sv, "NumPy array"},
    Magic{0, "\xff\xfe"sv, "UTF-16 (little-endian) text"},
    Magic{0, "\xfe\xff"sv, "UTF-16 (big-endian) text"},
};

bool matches(std::string_view head, const Magic& m) {
  return head.size() >= m.at + m.bytes.size() && head.substr(m.at, m.bytes.size()) == m.bytes;
}

const Magic* find_magic(std::string_view head) {
  for (const Magic& m : kMagic) {
    if (matches(head, m)) return &m;
  }
  return nullptr;
}

// A signature of printable ASCII ("MZ", "ID3", "BZh") can open a text file by chance, so it
// names the kind but does not make a file binary by itself; one with other bytes does. PDF is
// the exception: printable, yet never useful to the model as text.
bool decides_binary(const Magic& m) {
  if (m.bytes == "%PDF-") return true;
  for (const char c : m.bytes) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b >= 0x7f) return true;
  }
  return false;
}

// Bytes of HEAD in invalid sequences. A sequence cut by the end of HEAD is not counted: the
// file goes on past what was sniffed.
size_t invalid_utf8_bytes(std::string_view head) {
  size_t invalid = 0;
  for (size_t i = 0; i < head.size();) {
    const size_t n = utf8_char_len(head, i);
    if (n == 1 && static_cast<unsigned char>(head[i]) >= 0x80) {
      const size_t want = utf8_lead_len(static_cast<unsigned char>(head[i]));
      if (want > 1 && i + want > head.size()) break;  // truncated by the sniff window
      ++invalid;
    }
    i += n;
  }
  return invalid;
}

}  // namespace

std::string guess_kind(std::string_view head) {
  if (const Magic* m = find_magic(head)) return m->kind;
  // safetensors: an 8-byte little-endian header length, then the JSON header.
  if (head.size() >= 10 && head.substr(8, 2) == "{\"") return "safetensors tensor file";
  return "";
}

SniffResult sniff_binary(std::string_view head) {
  SniffResult out;
  out.kind = guess_kind(head);
  if (const size_t nul = head.find('\0'); nul != std::string_view::npos) {
    out.binary = true;
    out.reason = "a NUL byte at offset " + std::to_string(nul);
  } else if (const Magic* m = find_magic(head); m != nullptr && decides_binary(*m)) {
    out.binary = true;
    out.reason = "its magic bytes";
  } else if (const size_t bad = invalid_utf8_bytes(head);
             bad * 100 > head.size() * kMaxInvalidUtf8Percent) {
    out.binary = true;
    out.reason = std::to_string(bad) + " of the first " + std::to_string(head.size()) +
                 " bytes are not UTF-8";
  }
  return out;
}

}  // namespace infer::tools
