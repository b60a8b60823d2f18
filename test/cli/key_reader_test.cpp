// KeyReader on a pipe: UTF-8 characters, escape sequences passed through, bracketed pastes whole
// (however they are split across reads), the SIGINT flag; and where the history file goes.
#include "cli/key_reader.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "cli/line_editor.h"

namespace infer::cli {
namespace {

class Pipe {
 public:
  Pipe() { EXPECT_EQ(pipe(fds_), 0); }
  ~Pipe() {
    close(fds_[0]);
    if (fds_[1] >= 0) close(fds_[1]);
  }
  int read_end() const { return fds_[0]; }
  void write(std::string_view s) {
    EXPECT_EQ(::write(fds_[1], s.data(), s.size()), ssize_t(s.size()));
  }
  void close_write() {
    close(fds_[1]);
    fds_[1] = -1;
  }

 private:
  int fds_[2] = {-1, -1};
};

std::u32string chars(KeyReader& r, size_t n) {
  std::u32string out;
  for (size_t i = 0; i < n; ++i) {
    const Key k = r.next();
    EXPECT_EQ(k.kind, Key::Kind::kChar);
    out += k.ch;
  }
  return out;
}

TEST(KeyReader, DecodesUtf8AndPassesEscapeSequencesThrough) {
  volatile sig_atomic_t flag = 0;
  Pipe p;
  KeyReader r(p.read_end(), &flag);
  p.write("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\x1b[A\xFFz");
  EXPECT_EQ(chars(r, 9), U"a\u00E9\u20AC\U0001F600\x1b[A\uFFFDz");
  p.close_write();
  EXPECT_EQ(r.next().kind, Key::Kind::kEof);
}

TEST(KeyReader, ABracketedPasteIsOneKeyWithItsNewlinesNormalised) {
  volatile sig_atomic_t flag = 0;
  Pipe p;
  KeyReader r(p.read_end(), &flag);
  p.write("x\x1b[200~one\rtwo\r\nthree\n\x1b[201~y");
  EXPECT_EQ(r.next().ch, U'x');
  const Key k = r.next();
  EXPECT_EQ(k.kind, Key::Kind::kPaste);
  EXPECT_EQ(k.paste, "one\ntwo\nthree\n");
  EXPECT_EQ(r.next().ch, U'y');
}

TEST(KeyReader, APasteSplitAcrossManyWritesArrivesWhole) {
  volatile sig_atomic_t flag = 0;
  Pipe p;
  KeyReader r(p.read_end(), &flag);
  std::string body;
  for (int i = 0; i < 2000; ++i) body += "line " + std::to_string(i) + " of the paste\n";
  const std::string all = "\x1b[200~" + body + "\x1b[201~";
  std::thread writer([&] {
    for (size_t at = 0; at < all.size(); at += 7) p.write(std::string_view(all).substr(at, 7));
  });
  const Key k = r.next();
  writer.join();
  EXPECT_EQ(k.kind, Key::Kind::kPaste);
  EXPECT_EQ(k.paste, body);
  EXPECT_GT(k.paste.size(), 20000u);
}

TEST(KeyReader, AnInputEndingInsideAPasteGivesWhatCame) {
  volatile sig_atomic_t flag = 0;
  Pipe p;
  KeyReader r(p.read_end(), &flag);
  p.write("\x1b[200~cut sh");
  p.close_write();
  const Key k = r.next();
  EXPECT_EQ(k.kind, Key::Kind::kPaste);
  EXPECT_EQ(k.paste, "cut sh");
  EXPECT_EQ(r.next().kind, Key::Kind::kEof);
}

TEST(KeyReader, TheInterruptFlagIsReportedOnceAndCleared) {
  volatile sig_atomic_t flag = 1;
  Pipe p;
  KeyReader r(p.read_end(), &flag);
  EXPECT_EQ(r.next().kind, Key::Kind::kInterrupted);
  EXPECT_EQ(flag, 0);
  p.write("k");
  EXPECT_EQ(r.next().ch, U'k');
}

TEST(HistoryFile, XdgStateHomeThenHome) {
  EXPECT_EQ(history_file("/st", "/home/u"), "/st/infer/history");
  EXPECT_EQ(history_file(nullptr, "/home/u"), "/home/u/.local/state/infer/history");
  EXPECT_EQ(history_file("relative", "/home/u"), "/home/u/.local/state/infer/history");
  EXPECT_EQ(history_file("", "/home/u"), "/home/u/.local/state/infer/history");
  EXPECT_EQ(history_file(nullptr, nullptr), "");
}

}  // namespace
}  // namespace infer::cli
