// The REPL's input rules without a terminal: slash commands (parse_input) and the turn composed
// over several lines (Composer).
#include "cli/repl_input.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace infer::cli {
namespace {

TEST(ReplInput, CommandsAreRecognisedAndOthersRefused) {
  EXPECT_EQ(parse_input("/help").command, Command::kHelp);
  EXPECT_EQ(parse_input("/reset").command, Command::kReset);
  EXPECT_EQ(parse_input("  /stats  ").command, Command::kText);  // not at the line's start
  EXPECT_EQ(parse_input("/stats  ").command, Command::kStats);
  EXPECT_EQ(parse_input("/quit").command, Command::kQuit);
  const ReplInput foo = parse_input("/foo bar");
  EXPECT_EQ(foo.command, Command::kBad);
  EXPECT_TRUE(foo.text.starts_with("unknown command /foo (try /help")) << foo.text;
  const ReplInput args = parse_input("/reset now");
  EXPECT_EQ(args.command, Command::kBad);
  EXPECT_EQ(args.text, "/reset takes no arguments");
  EXPECT_EQ(parse_input("/").command, Command::kBad);
}

TEST(ReplInput, MemoryCommandsAndForgetsEpisodeId) {
  EXPECT_EQ(parse_input("/memory").command, Command::kMemory);
  EXPECT_EQ(parse_input("/remember").command, Command::kRemember);
  const ReplInput forget = parse_input("/forget  12 ");
  EXPECT_EQ(forget.command, Command::kForget);
  EXPECT_EQ(forget.text, "12");
  for (const char* bad : {"/forget", "/forget x", "/forget -1", "/forget 1 2",
                          "/forget 99999999999999999999"}) {
    const ReplInput in = parse_input(bad);
    EXPECT_EQ(in.command, Command::kBad) << bad;
    EXPECT_TRUE(in.text.starts_with("/forget takes an episode id")) << bad << ": " << in.text;
  }
  EXPECT_EQ(parse_input("/memory all").text, "/memory takes no arguments");
}

TEST(ReplInput, DoubleSlashSendsTheTextWithOneSlash) {
  const ReplInput in = parse_input("//stats is a command");
  EXPECT_EQ(in.command, Command::kText);
  EXPECT_EQ(in.text, "/stats is a command");
}

TEST(ReplInput, TextAndEmptyLines) {
  EXPECT_EQ(parse_input("hello /stats").command, Command::kText);
  EXPECT_EQ(parse_input("hello /stats").text, "hello /stats");
  EXPECT_EQ(parse_input(" \t ").command, Command::kEmpty);
  EXPECT_EQ(parse_input("").command, Command::kEmpty);
  EXPECT_EQ(parse_input("/stats\nof the run").command, Command::kText);  // a composed turn
}

TEST(Composer, AOneLineInputIsDoneAtOnce) {
  Composer c;
  EXPECT_EQ(c.add_line("hello"), "hello");
  EXPECT_TRUE(c.empty());
}

TEST(Composer, BackslashContinuesOnTheNextLine) {
  Composer c;
  EXPECT_EQ(c.add_line("first \\"), std::nullopt);
  EXPECT_FALSE(c.empty());
  EXPECT_EQ(c.add_line("second\\"), std::nullopt);
  EXPECT_EQ(c.add_line("third"), "first \nsecond\nthird");
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c.add_line("a\\"), std::nullopt);
  EXPECT_EQ(c.add_line(""), "a");  // an empty line ends it and adds nothing
}

TEST(Composer, TripleQuotesMakeABlock) {
  Composer c;
  EXPECT_EQ(c.add_line("\"\"\""), std::nullopt);
  EXPECT_TRUE(c.in_block());
  EXPECT_EQ(c.add_line("line one \\"), std::nullopt);  // no continuation inside a block
  EXPECT_EQ(c.add_line(""), std::nullopt);             // blank lines are kept
  EXPECT_EQ(c.add_line("/stats"), std::nullopt);
  EXPECT_EQ(c.add_line("\"\"\""), "line one \\\n\n/stats");
  EXPECT_TRUE(c.empty());
  EXPECT_FALSE(c.in_block());
}

TEST(Composer, AMultiLinePasteJoinsTheEditedLineAndEnterSends) {
  Composer c;
  c.add_paste("Summarize: ", "a\nb");
  EXPECT_FALSE(c.empty());
  EXPECT_EQ(c.add_line(""), "Summarize: a\nb");
  c.add_paste("", "x\ny");
  EXPECT_EQ(c.add_line("thanks"), "x\ny\nthanks");
}

TEST(Composer, APasteInsideABlockStaysInTheBlock) {
  Composer c;
  EXPECT_EQ(c.add_line("\"\"\""), std::nullopt);
  c.add_paste("", "p1\np2");
  EXPECT_EQ(c.add_line(""), std::nullopt);
  EXPECT_EQ(c.add_line("\"\"\""), "p1\np2\n");
}

TEST(Composer, ClearDropsWhatWasComposed) {
  Composer c;
  EXPECT_EQ(c.add_line("\"\"\""), std::nullopt);
  EXPECT_EQ(c.add_line("draft"), std::nullopt);
  c.clear();
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c.add_line("fresh"), "fresh");
}

TEST(ReplHelp, NamesEveryCommandAndConvention) {
  const std::string help(repl_help());
  for (const char* s : {"/help", "/reset", "/stats", "/quit", "//", "\\", "\"\"\"", "paste",
                        "Ctrl-C", "Ctrl-D", "history"}) {
    EXPECT_NE(help.find(s), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace infer::cli
