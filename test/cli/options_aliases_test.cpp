// parse_options for issue 28's switches: the llama.cpp-style aliases, -f, --min-p, the repeat
// penalty, --version, --force-threads, integer range messages and the did-you-mean hint; and
// read_prompt_file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string_view>
#include <vector>

#include "cli/options.h"
#include "test/cli/subprocess.h"

namespace infer::cli {
namespace {

Result<Options> parse(std::vector<std::string_view> args) { return parse_options(args); }

std::string error_of(std::vector<std::string_view> args) {
  const Result<Options> r = parse(args);
  return r.ok() ? "(parsed)" : r.error().message;
}

TEST(OptionAliases, ShortAndLlamaCppSpellingsSetTheSameFields) {
  const auto r = parse({"-p", "hello", "--temp", "0.5", "-c", "300", "--min-p", "0.05",
                        "--repeat-penalty", "1.1", "--repeat-last-n", "32"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r->prompt, "hello");
  EXPECT_FLOAT_EQ(*r->temperature, 0.5f);
  EXPECT_EQ(*r->window, 300);
  EXPECT_FLOAT_EQ(*r->min_p, 0.05f);
  EXPECT_FLOAT_EQ(*r->repeat_penalty, 1.1f);
  EXPECT_EQ(*r->repeat_last_n, 32);
  const auto c = parse({"--ctx-size=77", "--file", "p.txt"});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(*c->window, 77);
  EXPECT_EQ(*c->prompt_file, "p.txt");
  EXPECT_FALSE(c->prompt);
  const auto f = parse({"-f", "q.txt"});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f->prompt_file, "q.txt");
}

TEST(OptionAliases, VersionAndForceThreadsParse) {
  const auto v = parse({"--version"});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->version);
  const auto t = parse({"--threads", "64", "--force-threads"});
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->threads, 64);
  EXPECT_TRUE(t->force_threads);
}

TEST(OptionAliases, RejectsConflictsOfTheNewSwitches) {
  EXPECT_NE(error_of({"-f", "a.txt", "-p", "x"}).find("give the prompt once"), std::string::npos);
  EXPECT_NE(error_of({"-f", "a.txt", "positional"}).find("give the prompt once"),
            std::string::npos);
  EXPECT_NE(error_of({"-f", "a.txt", "--prompt-ids", "2"}).find("not both"), std::string::npos);
  EXPECT_NE(error_of({"-f", "a.txt", "-f", "b.txt"}).find("given twice"), std::string::npos);
  EXPECT_NE(error_of({"-f", "a.txt", "--serve"}).find("takes no prompt"), std::string::npos);
  EXPECT_EQ(error_of({"-c", "100", "--no-ring"}),
            "--no-ring conflicts with --anchors/--window (-c/--ctx-size)/--recall/--evict");
  EXPECT_EQ(error_of({"--repeat-last-n", "8"}), "--repeat-last-n needs --repeat-penalty");
  EXPECT_EQ(error_of({"--force-threads"}), "--force-threads needs --threads N");
  EXPECT_EQ(error_of({"--min-p", "1.5"}), "--min-p: expected a number 0 to 1, got '1.5'");
  EXPECT_EQ(error_of({"--repeat-penalty", "0"}),
            "--repeat-penalty: expected a number 0.01 to 100, got '0'");
  EXPECT_EQ(error_of({"--repeat-last-n", "-1", "--repeat-penalty", "1.1"}),
            "--repeat-last-n: expected an integer 0 to 1048576, got '-1'");
  // -f counts as a text prompt for --tokenize and --system.
  EXPECT_TRUE(parse({"-f", "a.txt", "--tokenize"}).ok());
  EXPECT_NE(error_of({"-f", "a.txt", "--system", "s"}).find("needs --chat"), std::string::npos);
}

TEST(OptionAliases, IntegerBoundsPrintAsIntegers) {
  EXPECT_EQ(error_of({"--window", "0"}), "--window: expected an integer 1 to 16777216, got '0'");
  EXPECT_EQ(error_of({"-c", "16777217"}),
            "--ctx-size: expected an integer 1 to 16777216, got '16777217'");
  EXPECT_EQ(error_of({"--anchors", "2000000"}),
            "--anchors: expected an integer 0 to 1048576, got '2000000'");
  EXPECT_EQ(error_of({"--mem-capacity", "0"}),
            "--mem-capacity: expected an integer 1 to 16777216, got '0'");
  EXPECT_EQ(error_of({"--bench-stream", "0"}),
            "--bench-stream: expected an integer 1 to 1099511627776, got '0'");
  EXPECT_EQ(error_of({"--seed", "x"}), "--seed: expected an integer 0 or more, got 'x'");
}

TEST(OptionAliases, ANearMissSuggestsTheSwitch) {
  EXPECT_EQ(error_of({"--temprature", "1"}),
            "unknown option '--temprature' (did you mean --temperature? see infer --help)");
  EXPECT_EQ(closest_switch("--thread"), "--threads");
  EXPECT_EQ(closest_switch("--repeat-penalt"), "--repeat-penalty");
  EXPECT_EQ(closest_switch("--mxa-tokens"), "--max-tokens");
  // Far from every switch: no guess.
  EXPECT_EQ(error_of({"--frobnicate"}), "unknown option '--frobnicate' (see infer --help)");
  EXPECT_EQ(closest_switch("--top"), "");
  EXPECT_EQ(closest_switch("-x"), "");
}

TEST(OptionAliases, MinPTurnsSamplingOnAndThePenaltyAppliesToGreedy) {
  const auto m = parse({"--min-p", "0.1"});
  ASSERT_TRUE(m.ok());
  const SamplingParams p = resolve_sampling(*m, GenerationConfig{});
  EXPECT_EQ(p.temperature, 1.0f);
  EXPECT_FLOAT_EQ(p.min_p, 0.1f);
  EXPECT_EQ(p.repeat_penalty, 1.0f);
  const auto g = parse({"--temp", "0", "--repeat-penalty", "1.3", "--repeat-last-n", "16"});
  ASSERT_TRUE(g.ok());
  const SamplingParams q = resolve_sampling(*g, GenerationConfig{});
  EXPECT_EQ(q.temperature, 0.0f);
  EXPECT_FLOAT_EQ(q.repeat_penalty, 1.3f);
  EXPECT_EQ(q.repeat_last_n, 16);
  const auto d = parse({"--repeat-penalty", "1.2"});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(resolve_sampling(*d, GenerationConfig{}).repeat_last_n, 64);  // llama.cpp's default
}

// Every switch the parser knows is in --help (the table and the text are kept by hand).
TEST(OptionAliases, HelpNamesEverySwitch) {
  const std::string help = usage();
  for (std::string_view name : switch_names()) {
    // Followed by its value or the next spelling, so that --temp does not match --temperature.
    const bool listed = help.find(std::string(name) + " ") != std::string::npos ||
                        help.find(std::string(name) + ",") != std::string::npos;
    EXPECT_TRUE(listed) << name;
  }
}

TEST(OptionAliases, ReadPromptFileTakesTheFileOrFailsWithItsName) {
  namespace fs = std::filesystem;
  const fs::path dir = test::make_temp_dir("prompt_file");
  { std::ofstream(dir / "p.txt") << "line one\nline two\n"; }
  auto r = parse({"-f", (dir / "p.txt").c_str()});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(read_prompt_file(*r).ok());
  EXPECT_EQ(*r->prompt, "line one\nline two\n");
  auto missing = parse({"-f", (dir / "none.txt").c_str()});
  ASSERT_TRUE(missing.ok());
  const Result<void> e = read_prompt_file(*missing);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, ErrorCode::kIo);
  EXPECT_EQ(e.error().message,
            "-f/--file: cannot read the prompt file '" + (dir / "none.txt").string() + "'");
  auto directory = parse({"-f", dir.c_str()});
  ASSERT_TRUE(directory.ok());
  EXPECT_FALSE(read_prompt_file(*directory).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace infer::cli
