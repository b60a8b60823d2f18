// The capped reader (tools_vfs/capped_reader.h): chunk boundaries by bytes, tokens and lines,
// UTF-8 at the cap, continuation by offset, empty and binary files, offsets past the end, and
// files that change between chunks.
#include "tools_vfs/capped_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "test/tools_vfs/temp_tree.h"
#include "tools_vfs/utf8_cut.h"

namespace infer::tools {
namespace {

using test::TempTree;

// One token per code point (an invalid byte is one too): a counter whose numbers a test can
// predict exactly.
size_t count_code_points(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += utf8_char_len(s, i)) ++n;
  return n;
}

// Every byte of S belongs to a well-formed sequence.
bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_char_len(s, i);
    if (n == 1 && static_cast<unsigned char>(s[i]) >= 0x80) return false;
    i += n;
  }
  return true;
}

class CappedReaderTest : public ::testing::Test {
 protected:
  void open(ReaderLimits limits) {
    auto vfs = Vfs::open(tree_.base());
    ASSERT_TRUE(vfs.ok()) << vfs.error().message;
    vfs_.emplace(std::move(vfs).value());
    auto reader = CappedReader::create(*vfs_, count_code_points, limits);
    ASSERT_TRUE(reader.ok()) << reader.error().message;
    reader_.emplace(std::move(reader).value());
  }
  FileChunk read(const std::string& path, uint64_t offset) {
    auto chunk = reader_->read(path, offset);
    EXPECT_TRUE(chunk.ok()) << chunk.error().message;
    return chunk.ok() ? std::move(chunk).value() : FileChunk{};
  }
  // Reads PATH from 0 to the end, checking each chunk continues the last; returns the bytes.
  std::string read_all(const std::string& path, size_t* n_chunks = nullptr) {
    std::string all;
    uint64_t offset = 0;
    for (size_t i = 0; i < 100000; ++i) {
      FileChunk c = read(path, offset);
      EXPECT_EQ(c.offset, offset);
      EXPECT_EQ(c.next_offset, offset + c.text.size());
      EXPECT_LE(c.text.size(), reader_->limits().max_chunk_bytes);
      all += c.text;
      offset = c.next_offset;
      if (c.eof || testing::Test::HasFailure()) {
        if (n_chunks != nullptr) *n_chunks = i + 1;
        return all;
      }
      EXPECT_FALSE(c.text.empty()) << "no progress at offset " << offset;
    }
    ADD_FAILURE() << "no end of file after 100000 chunks";
    return all;
  }
  TempTree tree_;
  std::optional<Vfs> vfs_;
  std::optional<CappedReader> reader_;
};

TEST_F(CappedReaderTest, ChunksEndExactlyAtTheByteCap) {
  tree_.file("a.txt", std::string(100, 'x'));
  open(ReaderLimits{.max_chunk_bytes = 32});
  const uint64_t starts[] = {0, 32, 64, 96};
  const uint64_t lefts[] = {68, 36, 4, 0};
  for (int i = 0; i < 4; ++i) {
    FileChunk c = read("a.txt", starts[i]);
    EXPECT_EQ(c.offset, starts[i]);
    EXPECT_EQ(c.next_offset, i < 3 ? starts[i] + 32 : 100u);
    EXPECT_EQ(c.bytes_left, lefts[i]);
    EXPECT_EQ(c.file_size_bytes, 100u);
    EXPECT_EQ(c.eof, i == 3);
    EXPECT_EQ(c.end, i < 3 ? ChunkEnd::kByteCap : ChunkEnd::kEndOfFile);
    EXPECT_EQ(c.n_tokens, c.text.size());
  }
  // A file of exactly the cap is one chunk that reaches the end.
  tree_.file("b.txt", std::string(32, 'y'));
  FileChunk whole = read("b.txt", 0);
  EXPECT_EQ(whole.text.size(), 32u);
  EXPECT_TRUE(whole.eof);
  EXPECT_EQ(whole.end, ChunkEnd::kEndOfFile);
}

TEST_F(CappedReaderTest, PrefersALineEndNearTheCapButNotAFarOne) {
  // A line end 8 bytes before the 64-byte cap ends the chunk; one 50 bytes before does not.
  tree_.file("near.txt", std::string(55, 'a') + "\n" + std::string(100, 'b'));
  tree_.file("far.txt", std::string(13, 'a') + "\n" + std::string(100, 'b'));
  open(ReaderLimits{.max_chunk_bytes = 64, .line_window_bytes = 16});
  FileChunk near = read("near.txt", 0);
  EXPECT_EQ(near.text, std::string(55, 'a') + "\n");
  EXPECT_EQ(near.end, ChunkEnd::kLineEnd);
  EXPECT_EQ(near.next_offset, 56u);
  FileChunk far = read("far.txt", 0);
  EXPECT_EQ(far.text.size(), 64u);
  EXPECT_EQ(far.end, ChunkEnd::kByteCap);
}

TEST_F(CappedReaderTest, NeverCutsAUtf8SequenceAtTheCap) {
  // "abc" then the 3-byte euro sign: a 4-byte cap would cut it, so the chunk stops before it.
  tree_.file("euro.txt", "abc\342\202\254d");  // octal: "\xacd" would be one escape
  open(ReaderLimits{.max_chunk_bytes = 4});
  FileChunk first = read("euro.txt", 0);
  EXPECT_EQ(first.text, "abc");
  EXPECT_EQ(first.next_offset, 3u);
  FileChunk second = read("euro.txt", 3);
  EXPECT_EQ(second.text, "\342\202\254d");
  EXPECT_TRUE(second.eof);

  // Every cap from 4 to 13 over 1-, 2-, 3- and 4-byte characters: each chunk is whole UTF-8.
  std::string text;
  for (int i = 0; i < 20; ++i) text += "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  tree_.file("mixed.txt", text);
  for (size_t cap = 4; cap <= 13; ++cap) {
    open(ReaderLimits{.max_chunk_bytes = cap});
    uint64_t offset = 0;
    std::string all;
    for (int guard = 0; guard < 1000; ++guard) {
      FileChunk c = read("mixed.txt", offset);
      EXPECT_TRUE(valid_utf8(c.text)) << "cap " << cap << " offset " << offset;
      EXPECT_GE(c.text.size() + 3, std::min<size_t>(cap, text.size() - offset)) << cap;
      all += c.text;
      offset = c.next_offset;
      if (c.eof) break;
    }
    EXPECT_EQ(all, text) << "cap " << cap;
  }
}

TEST_F(CappedReaderTest, TheTokenCapBindsBeforeTheByteCap) {
  // 50 two-byte characters (100 bytes) fit the byte cap; the 10-token cap stops at 20 bytes.
  std::string e_acute;
  for (int i = 0; i < 50; ++i) e_acute += "\xc3\xa9";
  tree_.file("e.txt", e_acute);
  open(ReaderLimits{.max_chunk_bytes = 100, .max_chunk_tokens = 10});
  FileChunk c = read("e.txt", 0);
  EXPECT_EQ(c.text.size(), 20u);
  EXPECT_EQ(c.n_tokens, 10u);
  EXPECT_EQ(c.end, ChunkEnd::kTokenCap);
  EXPECT_EQ(c.bytes_left, 80u);
  size_t n_chunks = 0;
  EXPECT_EQ(read_all("e.txt", &n_chunks), e_acute);
  EXPECT_EQ(n_chunks, 5u);
}

TEST_F(CappedReaderTest, TokenCapOnTextPrefersALineEndToo) {
  tree_.file("lines.txt", "0123456789abcde\nfghij");  // a line end at byte 16, tokens cap 18
  open(ReaderLimits{.max_chunk_bytes = 100, .max_chunk_tokens = 18, .line_window_bytes = 8});
  FileChunk c = read("lines.txt", 0);
  EXPECT_EQ(c.text, "0123456789abcde\n");
  EXPECT_EQ(c.end, ChunkEnd::kLineEnd);
  EXPECT_EQ(c.n_tokens, 16u);
}

TEST_F(CappedReaderTest, OffsetContinuationReassemblesTheFileByteForByte) {
  // Lines of varied length, multi-byte characters, a few invalid bytes (still text: far under
  // the binary threshold) and a final line without a line end.
  std::string text;
  uint32_t x = 12345;
  for (int line = 0; line < 150; ++line) {
    x = x * 1103515245u + 12345u;
    const int len = int(x >> 24) % 70;
    for (int k = 0; k < len; ++k) {
      text += (k % 9 == 0) ? "\xc3\xa9" : std::string(1, char('a' + k % 26));
    }
    if (line % 50 == 7) text += "\xff";
    if (line % 60 == 3) text += "\xf0\x9f\x98\x80";
    text += '\n';
  }
  text += "tail without a line end";
  tree_.file("big.txt", text);
  for (const size_t cap : {4, 7, 64, 1000, 100000}) {
    for (const size_t tokens : {3, 50, 100000}) {
      open(ReaderLimits{.max_chunk_bytes = cap, .max_chunk_tokens = tokens});
      EXPECT_EQ(read_all("big.txt"), text) << "cap " << cap << " tokens " << tokens;
    }
  }
}

TEST_F(CappedReaderTest, AnEmptyFileIsOneEmptyChunkAtTheEnd) {
  tree_.file("empty.txt", "");
  open({});
  FileChunk c = read("empty.txt", 0);
  EXPECT_TRUE(c.text.empty());
  EXPECT_TRUE(c.eof);
  EXPECT_FALSE(c.binary.has_value());
  EXPECT_EQ(c.bytes_left, 0u);
  EXPECT_EQ(render_chunk(c), "[file \"empty.txt\": empty]\n");
}

TEST_F(CappedReaderTest, BinaryFilesAreDescribedNotStreamed) {
  tree_.file("nul.dat", std::string("text then a NUL\0 and more", 25));
  tree_.file("img.png", std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16) + std::string(100, 'z'));
  tree_.file("gz.bin", "\x1f\x8b\x08 rest looks like text");
  std::string noise;
  for (int i = 0; i < 200; ++i) noise += char(0x80 + (i * 37) % 0x40);  // continuation bytes only
  tree_.file("noise.bin", noise);
  open({});
  FileChunk nul = read("nul.dat", 0);
  ASSERT_TRUE(nul.binary.has_value());
  EXPECT_TRUE(nul.text.empty());
  EXPECT_EQ(nul.binary->reason, "a NUL byte at offset 15");
  EXPECT_EQ(nul.file_size_bytes, 25u);
  FileChunk png = read("img.png", 0);
  ASSERT_TRUE(png.binary.has_value());
  EXPECT_EQ(png.binary->kind, "PNG image");
  EXPECT_EQ(render_chunk(png),
            "[file \"img.png\": binary, 116 bytes, looks like PNG image (a NUL byte at offset "
            "8); not shown]\n");
  FileChunk gz = read("gz.bin", 0);  // no NUL: the signature alone decides
  ASSERT_TRUE(gz.binary.has_value());
  EXPECT_EQ(gz.binary->kind, "gzip compressed data");
  FileChunk noisy = read("noise.bin", 0);
  ASSERT_TRUE(noisy.binary.has_value());
  EXPECT_EQ(noisy.binary->reason, "200 of the first 200 bytes are not UTF-8");
  // A binary file is refused at any offset: the head decides for the whole file.
  FileChunk later = read("img.png", 50);
  EXPECT_TRUE(later.binary.has_value());
  EXPECT_TRUE(later.text.empty());
}

TEST_F(CappedReaderTest, TextWithAFewInvalidBytesOrAPrintableSignatureStaysText) {
  tree_.file("latin1.txt", "caf\351 au lait, cr\350me br\373l\351e, and a long line of plain text");
  tree_.file("mz.txt", "MZ is how this note begins\n");
  open({});
  FileChunk latin = read("latin1.txt", 0);
  EXPECT_FALSE(latin.binary.has_value());
  EXPECT_EQ(latin.text.size(), latin.file_size_bytes);
  FileChunk mz = read("mz.txt", 0);
  EXPECT_FALSE(mz.binary.has_value());
  EXPECT_EQ(mz.text, "MZ is how this note begins\n");
}

TEST_F(CappedReaderTest, OffsetsAtAndPastTheEnd) {
  tree_.file("ten.txt", "0123456789");
  open({});
  FileChunk at_end = read("ten.txt", 10);
  EXPECT_TRUE(at_end.text.empty());
  EXPECT_TRUE(at_end.eof);
  auto past = reader_->read("ten.txt", 11);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(past.error().message.find("offset 11 is past the end of the file (10 bytes"),
            std::string::npos)
      << past.error().message;
  EXPECT_FALSE(reader_->read("ten.txt", UINT64_MAX).ok());
  EXPECT_EQ(reader_->read("missing.txt", 0).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(reader_->read("../escape", 0).error().code, ErrorCode::kInvalidArgument);
}

TEST_F(CappedReaderTest, AFileThatShrinksBetweenChunksGivesAClearError) {
  tree_.file("s.txt", std::string(100, 's'));
  open(ReaderLimits{.max_chunk_bytes = 40});
  FileChunk first = read("s.txt", 0);
  ASSERT_EQ(first.next_offset, 40u);
  ASSERT_EQ(::truncate(tree_.at("s.txt").c_str(), 10), 0);
  auto next = reader_->read("s.txt", first.next_offset);
  ASSERT_FALSE(next.ok());
  EXPECT_NE(next.error().message.find("(10 bytes now"), std::string::npos) << next.error().message;
  // Shrunk but still past the offset: the chunk reports the new size.
  tree_.file("s.txt", std::string(60, 't'));
  FileChunk rest = read("s.txt", 40);
  EXPECT_EQ(rest.text, std::string(20, 't'));
  EXPECT_TRUE(rest.eof);
}

TEST_F(CappedReaderTest, AFileThatGrowsBetweenChunksIsReadOnToItsNewEnd) {
  tree_.file("g.txt", std::string(50, 'g'));
  open(ReaderLimits{.max_chunk_bytes = 40});
  FileChunk first = read("g.txt", 0);
  EXPECT_EQ(first.bytes_left, 10u);
  tree_.file("g.txt", std::string(50, 'g') + std::string(30, 'h'));
  FileChunk second = read("g.txt", first.next_offset);
  EXPECT_EQ(second.text, std::string(10, 'g') + std::string(30, 'h'));
  EXPECT_EQ(second.file_size_bytes, 80u);
  EXPECT_TRUE(second.eof);
  // Growth after the end was reached: the old end offset continues into the new bytes.
  tree_.file("g.txt", std::string(50, 'g') + std::string(30, 'h') + "more");
  FileChunk third = read("g.txt", second.next_offset);
  EXPECT_EQ(third.text, "more");
  EXPECT_TRUE(third.eof);
}

TEST_F(CappedReaderTest, TheRenderingSaysWhatIsLeftAndWhereToContinue) {
  tree_.file("r.txt", "line one\nline two\n");
  open(ReaderLimits{.max_chunk_bytes = 12, .line_window_bytes = 8});
  FileChunk c = read("r.txt", 0);
  EXPECT_EQ(render_chunk(c),
            "[file \"r.txt\": 9 bytes from offset 0 of 18 bytes, 9 tokens]\n"
            "line one\n"
            "[9 bytes left: continue at offset 9]\n");
  FileChunk last = read("r.txt", c.next_offset);
  EXPECT_EQ(render_chunk(last),
            "[file \"r.txt\": 9 bytes from offset 9 of 18 bytes, 9 tokens]\n"
            "line two\n"
            "[end of file]\n");
}

TEST_F(CappedReaderTest, CreateRefusesLimitsItCannotHonour) {
  auto vfs = Vfs::open(tree_.base());
  ASSERT_TRUE(vfs.ok());
  EXPECT_FALSE(CappedReader::create(*vfs, nullptr).ok());
  EXPECT_FALSE(CappedReader::create(*vfs, count_code_points, {.max_chunk_bytes = 3}).ok());
  EXPECT_FALSE(
      CappedReader::create(*vfs, count_code_points, {.max_chunk_bytes = size_t(2) << 20}).ok());
  EXPECT_FALSE(CappedReader::create(*vfs, count_code_points, {.max_chunk_tokens = 0}).ok());
  EXPECT_FALSE(CappedReader::create(*vfs, count_code_points, {.sniff_bytes = 0}).ok());
  EXPECT_TRUE(CappedReader::create(*vfs, count_code_points).ok());
}

}  // namespace
}  // namespace infer::tools
