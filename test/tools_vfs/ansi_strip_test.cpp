// AnsiStripper on fixed cases, the PTY ring's offsets and drops, and the named keys.
#include "tools_vfs/ansi_strip.h"

#include <gtest/gtest.h>

#include "tools_vfs/pty_keys.h"
#include "tools_vfs/pty_ring.h"

namespace infer::tools {
namespace {

// Completed lines, then "|" and the unfinished line.
std::string strip(std::string_view bytes) {
  AnsiStripper s;
  std::string out;
  s.feed(bytes, out);
  return out + "|" + s.current_line();
}

TEST(AnsiStrip, RemovesColourCodes) {
  EXPECT_EQ(strip("\x1b[1;31mred\x1b[0m plain\x1b[38;5;208m orange\x1b[m\n"),
            "red plain orange\n|");
}

TEST(AnsiStrip, RemovesOscTitlesEndedByBelOrSt) {
  EXPECT_EQ(strip("\x1b]0;my title\x07$ \x1b]2;other\x1b\\ls\n"), "$ ls\n|");
  EXPECT_EQ(strip("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n"), "link\n|");
}

TEST(AnsiStrip, RemovesCharsetSelectionsAndOtherEscapes) {
  EXPECT_EQ(strip("\x1b(Bq\x1b)0\x1b=x\x1b>\x1b" "7y\x1b" "8\x1bPdcs body\x1b\\z\n"), "qxyz\n|");
}

TEST(AnsiStrip, CarriageReturnRedrawsCollapseToTheLast) {
  EXPECT_EQ(strip("[#   ] 10%\r[##  ] 50%\r[####] 100%\r\ndone\r\n"), "[####] 100%\ndone\n|");
  // The screen keeps what a shorter redraw does not cover, unless the line is erased.
  EXPECT_EQ(strip("downloading\rok\n"), "okwnloading\n|");
  EXPECT_EQ(strip("downloading\r\x1b[Kok\n"), "ok\n|");
  EXPECT_EQ(strip("downloading\x1b[2K\rok\n"), "ok\n|");
}

TEST(AnsiStrip, BackspacesAreApplied) {
  EXPECT_EQ(strip("abcd\b\bXY\n"), "abXY\n|");
  EXPECT_EQ(strip("abc\b \b\b \b\n"), "a\n|");  // the shell's echo of two erasures
  EXPECT_EQ(strip("h\xc3\xa9\bE\n"), "hE\n|");      // one backspace takes a whole UTF-8 char
  EXPECT_EQ(strip("\b\bx\n"), "x\n|");               // nothing before the line's start
}

TEST(AnsiStrip, CursorMovesAlongTheLine) {
  EXPECT_EQ(strip("abcdef\x1b[3DXY\n"), "abcXYf\n|");
  EXPECT_EQ(strip("ab\x1b[3Cc\n"), "ab   c\n|");
  EXPECT_EQ(strip("a  \nPassword: "), "a\n|Password: ");  // an open line keeps its blanks
  EXPECT_EQ(strip("abcdef\x1b[2GZ\n"), "aZcdef\n|");
  EXPECT_EQ(strip("abcdef\x1b[3D\x1b[K\n"), "abc\n|");
  EXPECT_EQ(strip("abcdef\x1b[4D\x1b[2P\n"), "abef\n|");  // delete two characters
  EXPECT_EQ(strip("abcdef\x1b[4D\x1b[2@\n"), "ab  cdef\n|");
}

TEST(AnsiStrip, MovesToAnotherRowEndTheLine) {
  EXPECT_EQ(strip("\x1b[H\x1b[2Jtop\x1b[2;1Hsecond\x1b[Athird"), "top\nsecond\n|third");
}

TEST(AnsiStrip, UnfinishedLineIsAPrompt) {
  EXPECT_EQ(strip("line\nPassword: "), "line\n|Password: ");
}

TEST(AnsiStrip, SequencesSplitAcrossFeedsAreHandledWhole) {
  const std::string whole =
      "\x1b[1;32mgreen\x1b[0m \x1b]0;title\x1b\\x\r\xc3\xa9\x1b[K\x1b(B!\nnext\n";
  const std::string expected = strip(whole);
  EXPECT_EQ(expected, "\xc3\xa9!\nnext\n|");
  for (size_t cut = 0; cut <= whole.size(); ++cut) {
    AnsiStripper s;
    std::string out;
    s.feed(std::string_view(whole).substr(0, cut), out);
    s.feed(std::string_view(whole).substr(cut), out);
    EXPECT_EQ(out + "|" + s.current_line(), expected) << "cut at byte " << cut;
  }
}

TEST(AnsiStrip, BoundedLinesAndSequences) {
  AnsiStripper s(16);
  std::string out;
  s.feed(std::string(40, 'a'), out);
  EXPECT_EQ(out, std::string(16, 'a') + "\n" + std::string(16, 'a') + "\n");
  EXPECT_EQ(s.current_line(), std::string(8, 'a'));
  // An OSC that never ends swallows at most 4 KiB, then text shows again.
  AnsiStripper t;
  std::string out2;
  t.feed("\x1b]0;" + std::string(5000, 't') + "\nvisible\n", out2);
  EXPECT_NE(out2.find("visible\n"), std::string::npos);
  EXPECT_LT(out2.size(), 1000u);
  // A cursor move of a million columns stays within the line's limit.
  AnsiStripper u(64);
  std::string out3;
  u.feed("x\x1b[999999Cy\n", out3);
  EXPECT_LE(out3.size(), 66u);
}

TEST(AnsiStrip, TracksApplicationCursorKeys) {
  AnsiStripper s;
  std::string out;
  EXPECT_FALSE(s.application_cursor_keys());
  s.feed("\x1b[?1049;1h", out);
  EXPECT_TRUE(s.application_cursor_keys());
  s.feed("\x1b[?1l", out);
  EXPECT_FALSE(s.application_cursor_keys());
  EXPECT_EQ(out, "");
}

TEST(PtyRing, FollowsOffsetsAndCountsDrops) {
  PtyRing ring(8);
  ring.append("abcde");
  auto r = ring.read(0, 100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, "abcde");
  EXPECT_EQ(r->next, 5u);
  ring.append("fghijk");  // 11 bytes so far, the first 3 dropped
  EXPECT_EQ(ring.start(), 3u);
  r = ring.read(2, 100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, "defghijk");
  EXPECT_EQ(r->skipped, 1u);
  EXPECT_EQ(r->from, 3u);
  r = ring.read(5, 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, "fgh");
  ring.append(std::string(20, 'z') + "END");  // larger than the ring: its tail is kept
  r = ring.read(0, 100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, "zzzzzEND");
  EXPECT_EQ(r->end, 34u);
  EXPECT_EQ(r->skipped, 26u);
  EXPECT_FALSE(ring.read(35, 1).ok());  // an offset from the future is an error
}

TEST(PtyKeys, NamedKeysGiveXtermBytes) {
  EXPECT_EQ(*key_bytes("ctrl-c"), "\x03");
  EXPECT_EQ(*key_bytes("Ctrl-D"), "\x04");
  EXPECT_EQ(*key_bytes("^Z"), "\x1a");
  EXPECT_EQ(*key_bytes("c-\\"), "\x1c");
  EXPECT_EQ(*key_bytes("enter"), "\r");
  EXPECT_EQ(*key_bytes("tab"), "\t");
  EXPECT_EQ(*key_bytes("esc"), "\x1b");
  EXPECT_EQ(*key_bytes("up"), "\x1b[A");
  EXPECT_EQ(*key_bytes("up", true), "\x1bOA");
  EXPECT_EQ(*key_bytes("left"), "\x1b[D");
  EXPECT_EQ(*key_bytes("pagedown"), "\x1b[6~");
  const auto bad = key_bytes("ctrl-shift-q\x01");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("unknown key"), std::string::npos);
}

}  // namespace
}  // namespace infer::tools
