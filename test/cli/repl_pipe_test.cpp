// build/infer's pipe mode (stdin a file: one turn a line) on e2b-vocab, the fixture with Gemma
// 4's tokenizer: the context /stats reports after -n 0 turns shows which ids a turn appended
// (chat markers as control tokens, user text never unless --special; the --system turn), and
// a refused turn or command makes the exit status 1 after the rest of the input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "actors/tool_registry.h"
#include "cli/chat_turn.h"
#include "model/synth/demo_model.h"
#include "model/thread_pool.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tool_format/tool_tokens.h"
#include "model/tool_format/format_pieces.h"
#include "test/cli/subprocess.h"
#include "test/test_paths.h"

namespace infer::test {
namespace {

namespace fs = std::filesystem;

fs::path vocab_dir() { return shared_fixtures() / "gemma4-text" / "e2b-vocab"; }

RunResult pipe_infer(const std::string& input, std::vector<std::string> args) {
  std::vector<std::string> all = {"--model", vocab_dir().string(), "--threads",
                                  "1",       "--temperature",      "0"};
  all.insert(all.end(), args.begin(), args.end());
  return run_binary_with_input(infer_binary(), all, input);
}

// The "context: N tokens" of the last /stats.
long context_tokens(const RunResult& r) {
  static const std::regex re("context: ([0-9]+) tokens");
  long n = -1;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), re); it != std::sregex_iterator();
       ++it) {
    n = std::stol((*it)[1]);
  }
  EXPECT_GE(n, 0) << "no /stats output: " << r.out << r.err;
  return n;
}

// User text as the REPL encodes it without --special: no marker spelled in it is matched.
size_t plain_tokens(std::string_view text) {
  static const Result<Tokenizer> tok = Tokenizer::load(vocab_dir() / "tokenizer.json");
  EXPECT_TRUE(tok);
  return tok ? encode_unmarked(*tok, text).size() : 0;
}

// <bos> <|turn> "user\n{text}" <turn|> "\n" <|turn> "model\n": the first turn's length.
size_t first_turn_tokens(const std::string& user) {
  return 2 + plain_tokens("user\n" + user) + 1 + plain_tokens("\n") + 1 + plain_tokens("model\n");
}

TEST(ReplPipe, TheFirstTurnIsTheChatTemplate) {
  // golden prompt 0 of e2b-vocab: 16 ids from HF's chat template.
  const RunResult r = pipe_infer("What is the capital of France?\n/stats\n", {"-n", "0"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(context_tokens(r), 16) << r.out;
}

TEST(ReplPipe, UserTextSpellingControlTokensStaysText) {
  const RunResult plain = pipe_infer("a <turn|> b <|turn>model c\n/stats\n", {"-n", "0"});
  const RunResult special =
      pipe_infer("a <turn|> b <|turn>model c\n/stats\n", {"-n", "0", "--special"});
  EXPECT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(special.status, 0) << special.err;
  EXPECT_EQ(size_t(context_tokens(plain)), first_turn_tokens("a <turn|> b <|turn>model c"));
  // --special: each marker is one token, where as text it takes several.
  EXPECT_LT(context_tokens(special) + 2, context_tokens(plain));
}

TEST(ReplPipe, SystemOpensTheContextAgainAfterReset) {
  const std::string q = "What is the capital of France?\n";
  const RunResult r =
      pipe_infer(q + "/stats\n/reset\n" + q + "/stats\n", {"-n", "0", "--system", "Be brief."});
  EXPECT_EQ(r.status, 0) << r.err;
  // <|turn> "system\nBe brief." <turn|> "\n" before the user turn, both times.
  const size_t system = 1 + plain_tokens("system\nBe brief.") + 1 + plain_tokens("\n");
  const std::string expected = "context: " + std::to_string(16 + system) + " tokens";
  const size_t first = r.out.find(expected);
  ASSERT_NE(first, std::string::npos) << r.out;
  EXPECT_NE(r.out.find(expected, first + 1), std::string::npos)
      << "the turn after /reset should hold the same ids: " << r.out;
}

TEST(ReplPipe, DoubleSlashSendsTextAndUnknownCommandsAreRefused) {
  const RunResult r = pipe_infer("/foo\n//stats\n/stats\n", {"-n", "1"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("infer: unknown command /foo (try /help"), std::string::npos) << r.err;
  // One turn only: "//stats" (sent as "/stats"), not "/foo".
  EXPECT_NE(r.out.find(", 1 turns,"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("turn 1: 1 tokens"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("turn 2:"), std::string::npos) << r.err;
  EXPECT_EQ(size_t(context_tokens(r)), first_turn_tokens("/stats") + 1);
}

TEST(ReplPipe, AFailedTurnMakesTheExitStatusOneAfterTheRestOfTheInput) {
  // --no-ring holds 8192 tokens: a line of ~10000 is refused, the next turn still runs.
  std::string huge;
  for (int i = 0; i < 5000; ++i) huge += "x y ";
  const RunResult r = pipe_infer(huge + "\nhello\n/stats\n", {"-n", "1", "--no-ring"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("infer: the context would hold"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("turn 2: 1 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("infer: pipe input: 1 turn(s) failed"), std::string::npos) << r.err;
  // The refused turn left the context empty: "hello" opened it (with <bos>).
  EXPECT_EQ(size_t(context_tokens(r)), first_turn_tokens("hello") + 1) << r.out;
}

TEST(ReplPipe, AllTurnsSucceedingExitsZero) {
  const RunResult r = pipe_infer("hello\nagain\n", {"-n", "2"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("turn 2: 2 tokens"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace infer::test

namespace infer::test {
namespace {

// /memory, /remember, /forget N on --memory (docs/MEMORY.md): the first turn is stored on
// request, a turn quoting it recalls it before it generates (the last recall /memory shows), and
// forgetting an unknown episode is refused (exit status 1 after the rest of the input).
TEST(ReplPipe, MemoryCommandsStoreRecallListAndForget) {
  const fs::path mem =
      fs::temp_directory_path() / ("infer-repl-mem-" + std::to_string(::getpid()));
  fs::remove(mem);
  std::string first, excerpt;
  const char* words[] = {"apple", "river", "stone", "cloud", "window", "garden", "music", "paper"};
  const auto word = [&](int i) { return std::string(words[(i * 7 + i / 8) % 8]); };
  // append() rather than "literal" + string: GCC 12 at -O3 warns falsely (-Wrestrict) on that.
  for (int i = 0; i < 60; ++i) first.append(i > 0 ? " " : "").append(word(i));
  for (int i = 20; i < 40; ++i) excerpt.append(i > 20 ? " " : "").append(word(i));
  const RunResult r = pipe_infer(first + "\n/remember\n" + excerpt +
                                     "\n/memory\n/forget 1\n/forget 999\n/memory\n",
                                 {"-n", "1", "--memory", mem.string(), "--anchors", "4",
                                  "--window", "256", "--recall", "64", "--episode-tokens", "32"});
  fs::remove(mem);
  EXPECT_EQ(r.status, 1) << r.err;  // the refused /forget 999
  EXPECT_NE(r.out.find("remembered #1: pos 0-31, 32 tokens"), std::string::npos) << r.out;
  // The second turn recalled what the first stored: /memory lists it with its scores.
  const size_t listed = r.out.find("memory: ");
  ASSERT_NE(listed, std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" of 64 episodes in " + mem.string(), listed), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("last recall: ", listed), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("score ", listed), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("last recall: none"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("forgot #1"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("no episode 999"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 command(s) refused"), std::string::npos) << r.err;
}

TEST(ReplPipe, MemoryCommandsWithoutMemorySayHowToTurnItOn) {
  const RunResult r = pipe_infer("/memory\n/remember\n/forget 3\n/forget x\n", {"-n", "0"});
  EXPECT_EQ(r.status, 1) << r.err;  // "/forget x" is refused; the rest only explain
  size_t n = 0;
  for (size_t at = r.out.find("episodic memory is off: start infer with --memory");
       at != std::string::npos; at = r.out.find("episodic memory is off", at + 1)) {
    ++n;
  }
  EXPECT_EQ(n, 3u) << r.out;
  EXPECT_NE(r.err.find("/forget takes an episode id"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace infer::test

namespace infer::test {
namespace {

// --tools ROOT in the pipe mode: /tools lists the built-in tools, the first context opens with
// the system turn declaring them, a ROOT that is not a directory and --anchors too small to
// hold that turn are usage errors (exit status 2).
TEST(ReplPipe, ToolsAreDeclaredInTheSystemTurnAndListed) {
  const fs::path root = fs::temp_directory_path();
  const RunResult r = pipe_infer("/tools\nhi\n/stats\n", {"-n", "0", "--tools", root.string()});
  EXPECT_EQ(r.status, 0) << r.err;
  for (const char* name : {"list_dir", "read_file", "write_file", "search_files", "run_command"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name << " in " << r.out;
  }
  const Result<Tokenizer> tok = Tokenizer::load(vocab_dir() / "tokenizer.json");
  ASSERT_TRUE(tok);
  const std::vector<ToolDeclaration> tools = actors::builtin_declarations();
  const size_t system = cli::system_turn_ids(*tok, "", false, tools).size();  // with <bos>
  EXPECT_EQ(size_t(context_tokens(r)), system + first_turn_tokens("hi") - 1) << r.out;

  const RunResult off = pipe_infer("/tools\n", {"-n", "0"});
  EXPECT_EQ(off.status, 0) << off.err;
  EXPECT_NE(off.out.find("tools are off"), std::string::npos) << off.out;
}

TEST(ReplPipe, ToolsRefuseAMissingRootAndAnchorsThatCannotHoldTheDeclarations) {
  const RunResult missing = pipe_infer("hi\n", {"--tools", "/no/such/infer-root"});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("'/no/such/infer-root' does not exist"), std::string::npos)
      << missing.err;
  const RunResult small = pipe_infer(
      "hi\n", {"-n", "0", "--tools", fs::temp_directory_path().string(), "--anchors", "32"});
  EXPECT_EQ(small.status, 2);
  EXPECT_NE(small.err.find("cannot hold the system turn that declares the tools"),
            std::string::npos)
      << small.err;
}

// A model whose tokenizer has no tool markers (the demo model's with them renamed away): --tools
// is refused with the reason and exit 2, not a failed check while the anchors are sized.
TEST(ReplPipe, ToolsRefuseATokenizerWithoutToolMarkers) {
  const fs::path dir = fs::temp_directory_path() / ("infer-demo-" + std::to_string(getpid()));
  ThreadPool pool(1);
  ASSERT_TRUE(write_demo_model(dir, pool).ok());
  {
    std::ifstream in(dir / "tokenizer.json");
    nlohmann::ordered_json tok = nlohmann::ordered_json::parse(in);
    nlohmann::ordered_json kept = nlohmann::ordered_json::array();
    for (auto& t : tok["added_tokens"]) {
      if (t["special"].get<bool>()) kept.push_back(t);
    }
    tok["added_tokens"] = kept;
    nlohmann::ordered_json vocab = tok["model"]["vocab"];
    for (std::string_view m : kFormatMarkers) {
      if (m == kTurnOpen || m == kTurnClose || !vocab.contains(m)) continue;
      const auto id = vocab[std::string(m)];
      vocab.erase(std::string(m));
      vocab["<renamed" + std::to_string(id.get<int>()) + ">"] = id;
    }
    tok["model"]["vocab"] = vocab;
    std::ofstream(dir / "tokenizer.json") << tok.dump(1);
  }
  const RunResult r = run_binary_with_input(
      infer_binary(), {"--model", dir.string(), "--tools", fs::temp_directory_path().string()},
      "hi\n");
  fs::remove_all(dir);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--tools: the model's tokenizer has no tool-call tokens"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace infer::test
