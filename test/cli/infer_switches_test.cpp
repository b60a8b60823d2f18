// build/infer and build/mkmodel as a user runs them, for issue 28's switches: --version, the
// did-you-mean hint, -f, --min-p and the repeat penalty (CPU and --gpu), the thread choice and
// its check, the KV memory refusal, the tokenizer vocabulary check and mkmodel --tokenizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test/cli/subprocess.h"
#include "test/test_paths.h"

namespace infer::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

RunResult infer(const std::vector<std::string>& args) { return run_binary(infer_binary(), args); }
RunResult mkmodel(const std::vector<std::string>& args) {
  return run_binary(infer_binary().parent_path() / "mkmodel", args);
}
// As infer_cli_test.cpp's infer_gpu: lavapipe's unload leaks a block LeakSanitizer cannot name.
RunResult infer_gpu(const std::vector<std::string>& args) {
  return run_binary(infer_binary(), args,
                    {{"ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1:verify_asan_link_order=0"}});
}

fs::path mini() { return repo_fixtures() / "gemma4-text" / "e2b-mini"; }
fs::path vocab() { return shared_fixtures() / "gemma4-text" / "e2b-vocab"; }

void expect_one_error_line(const RunResult& r) {
  EXPECT_TRUE(r.err.starts_with("infer: ")) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

std::string golden_prompt() {
  const json g = json::parse(read_file(mini() / "golden.json"));
  std::string s;
  for (int id : g["prompt_ids"].get<std::vector<int>>()) {
    if (!s.empty()) s += ',';
    s += std::to_string(id);
  }
  return s;
}

TEST(InferSwitches, VersionPrintsTheProjectVersion) {
  const RunResult r = infer({"--version"});
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(r.out.starts_with("infer 0.1.0")) << r.out;
  const RunResult m = mkmodel({"--version"});
  EXPECT_EQ(m.status, 0);
  EXPECT_TRUE(m.out.starts_with("mkmodel 0.1.0")) << m.out;
  EXPECT_EQ(r.out.substr(6), m.out.substr(8));  // the same version and commit
}

TEST(InferSwitches, ANearMissIsAUsageErrorThatNamesTheSwitch) {
  const RunResult r = infer({"--temprature", "0.5"});
  EXPECT_EQ(r.status, 2);
  expect_one_error_line(r);
  EXPECT_NE(r.err.find("did you mean --temperature?"), std::string::npos) << r.err;
}

TEST(InferSwitches, HelpListsTheNewSwitchesAndChatHandling) {
  const RunResult r = infer({"--help"});
  EXPECT_EQ(r.status, 0);
  for (const char* s : {"-p, --prompt", "-f, --file", "--temp F", "-c, --ctx-size", "--min-p",
                        "--repeat-penalty", "--repeat-last-n", "--version", "--force-threads",
                        "--chat", "--system TEXT", "--special", "chat handling:"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  }
}

// e2b-vocab has a tokenizer: -f FILE gives what -p gives for the file's text.
TEST(InferSwitches, APromptFileGeneratesWhatTheSamePromptDoes) {
  const fs::path dir = make_temp_dir("prompt_file");
  { std::ofstream(dir / "p.txt") << "The capital of France is"; }
  const std::vector<std::string> common = {"--model", vocab().string(), "-n", "4", "--output",
                                           "ids", "--temp", "0"};
  std::vector<std::string> by_file = common, by_text = common;
  by_file.insert(by_file.end(), {"-f", (dir / "p.txt").string()});
  by_text.insert(by_text.end(), {"-p", "The capital of France is"});
  const RunResult f = infer(by_file), p = infer(by_text);
  EXPECT_EQ(f.status, 0) << f.err;
  EXPECT_EQ(p.status, 0) << p.err;
  EXPECT_FALSE(f.out.empty());
  EXPECT_EQ(f.out, p.out);
  const RunResult missing = infer({"--model", vocab().string(), "-f", (dir / "no.txt").string()});
  EXPECT_EQ(missing.status, 1);
  expect_one_error_line(missing);
  EXPECT_NE(missing.err.find("no.txt"), std::string::npos) << missing.err;
  const RunResult both = infer({"-f", (dir / "p.txt").string(), "-p", "x"});
  EXPECT_EQ(both.status, 2);
  expect_one_error_line(both);
  fs::remove_all(dir);
}

RunResult greedy_ids(const std::vector<std::string>& extra, bool gpu = false) {
  std::vector<std::string> args = {"--model", mini().string(), "--prompt-ids", golden_prompt(),
                                   "-n", "24", "--output", "ids", "--temp", "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  if (gpu) args.push_back("--gpu");
  return gpu ? infer_gpu(args) : infer(args);
}

// The repeat penalty changes greedy tokens (the golden continuation repeats ids), and the GPU,
// which otherwise takes greedy argmaxes on the device, gives the same penalised tokens.
TEST(InferSwitches, RepeatPenaltyChangesGreedyTokensOnCpuAndGpuAlike) {
  const RunResult plain = greedy_ids({});
  ASSERT_EQ(plain.status, 0) << plain.err;
  const RunResult penalised = greedy_ids({"--repeat-penalty", "3", "--repeat-last-n", "64"});
  ASSERT_EQ(penalised.status, 0) << penalised.err;
  EXPECT_NE(penalised.out, plain.out);
  EXPECT_NE(penalised.err.find("repeat penalty: 3 over the last 64 ids"), std::string::npos);
  // A penalty of 1 is off: the plain tokens.
  EXPECT_EQ(greedy_ids({"--repeat-penalty", "1"}).out, plain.out);
  const RunResult gpu = greedy_ids({"--repeat-penalty", "3", "--repeat-last-n", "64"}, true);
  ASSERT_EQ(gpu.status, 0) << gpu.err;
  EXPECT_EQ(gpu.out, penalised.out);
}

// min-p 1 keeps only the most likely token: sampling at any temperature is then greedy.
TEST(InferSwitches, MinPOneSamplesTheGreedyTokens) {
  const RunResult plain = greedy_ids({});
  const RunResult hot = greedy_ids({"--temp", "5", "--min-p", "1", "--seed", "9"});
  ASSERT_EQ(hot.status, 0) << hot.err;
  EXPECT_EQ(hot.out, plain.out);
  EXPECT_NE(hot.err.find("min-p 1"), std::string::npos) << hot.err;
  // Without min-p the same hot sampling wanders off the greedy path.
  EXPECT_NE(greedy_ids({"--temp", "5", "--seed", "9"}).out, plain.out);
}

TEST(InferSwitches, TheDefaultThreadCountFollowsTheModelSize) {
  const RunResult r = greedy_ids({});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("cpu: 1 thread (default; model reads 0.8 MB a token;"), std::string::npos)
      << r.err;
  const RunResult two = greedy_ids({"--threads", "2"});
  EXPECT_NE(two.err.find("cpu: 2 threads (--threads;"), std::string::npos) << two.err;
  EXPECT_EQ(two.out, r.out);
}

TEST(InferSwitches, MoreThreadsThanCpusNeedForceThreads) {
  const RunResult r = greedy_ids({"--threads", "4096"});
  EXPECT_EQ(r.status, 2);
  expect_one_error_line(r);
  EXPECT_NE(r.err.find("add --force-threads"), std::string::npos) << r.err;
  const RunResult forced = greedy_ids({"--threads", "64", "--force-threads"});
  EXPECT_EQ(forced.status, 0) << forced.err;
  EXPECT_EQ(forced.out, greedy_ids({}).out);
}

// e2b-mini's shapes with 16 KV heads of 512 on the full layers (random weights in memory, a few
// MB): a ring of 1,048,576 anchors + 16,777,216 window + 96 recall needs about 2.4 TB, more
// than any machine the tests run on, so it is refused before anything is allocated, with the
// figures. (e2b-mini itself once grew to 13.8 GB of RSS this way with no output.)
TEST(InferSwitches, AKvRingLargerThanTheMachineIsRefusedWithTheFigures) {
  const fs::path dir = make_temp_dir("wide_kv");
  json cfg = json::parse(read_file(mini() / "config.json"));
  json& text = cfg["text_config"];
  text["num_attention_heads"] = 16;
  text["num_key_value_heads"] = 16;
  text["per_layer_config"] = {{"2", {{"head_dim", 512}}}, {"4", {{"head_dim", 512}}},
                              {"6", {{"head_dim", 512}}}};
  { std::ofstream(dir / "config.json") << cfg.dump(); }
  for (const char* window : {"--window", "-c"}) {
    const RunResult r = infer({"--model", (dir / "config.json").string(), "--anchors", "1048576",
                               window, "16777216", "--prompt-ids", "2", "-n", "1", "--output",
                               "ids"});
    EXPECT_EQ(r.status, 1) << window;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("\ninfer: a KV ring of 17,825,888 positions needs 2374.9 GB for this "
                         "model; this machine has "),
              std::string::npos)
        << r.err;
    EXPECT_TRUE(r.err.ends_with(" GB available (lower --window/--anchors)\n")) << r.err;
  }
  // With --gpu the rings are checked against the device's local heap (lavapipe in CI: host
  // memory) before anything is uploaded.
  const RunResult gpu = infer_gpu({"--gpu", "--model", (dir / "config.json").string(),
                                   "--anchors", "1048576", "-c", "16777216", "--prompt-ids", "2",
                                   "-n", "1", "--output", "ids"});
  EXPECT_EQ(gpu.status, 1);
  EXPECT_NE(gpu.err.find("\ninfer: a KV ring of 17,825,888 positions needs "), std::string::npos)
      << gpu.err;
  EXPECT_NE(gpu.err.find(" for this model; the device has "), std::string::npos) << gpu.err;
  // The same model with the default ring runs.
  const RunResult ok = infer({"--model", (dir / "config.json").string(), "--prompt-ids", "2",
                              "-n", "2", "--output", "ids"});
  EXPECT_EQ(ok.status, 0) << ok.err;
  const RunResult no_ring = infer({"-c", "100", "--no-ring"});
  EXPECT_EQ(no_ring.status, 2);
  expect_one_error_line(no_ring);
  fs::remove_all(dir);
}

// A tokenizer.json of a larger vocabulary than the model's is found at load (exit 1); the real
// Gemma 4 tokenizer, one special token past the text vocabulary, loads.
TEST(InferSwitches, ATokenizerLargerThanTheModelFailsAtLoad) {
  const fs::path dir = make_temp_dir("big_tokenizer");
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors"}) {
    fs::copy(mini() / f, dir / f);
  }
  fs::copy(vocab() / "tokenizer.json", dir / "tokenizer.json");
  const RunResult r = infer({"--model", dir.string(), "-p", "hello", "-n", "1"});
  EXPECT_EQ(r.status, 1);
  expect_one_error_line(r);
  EXPECT_NE(r.err.find("the tokenizer's text ids go up to 262143, the model's vocab_size is 512"),
            std::string::npos)
      << r.err;
  // The session's loading (REPL, pipe, --serve) checks the same.
  const RunResult served = infer({"--model", dir.string(), "--serve"});
  EXPECT_EQ(served.status, 1);
  expect_one_error_line(served);
  EXPECT_NE(served.err.find("the model's vocab_size is 512"), std::string::npos) << served.err;
  fs::remove_all(dir);
  const RunResult real = infer({"--model", vocab().string(), "-p", "hello", "-n", "1"});
  EXPECT_EQ(real.status, 0) << real.err;
}

// A BPE of 13 ids (fits e2b-mini's 512).
std::string tiny_tokenizer() {
  json vocab = {{"<unk>", 0}, {"<bos>", 1}, {"a", 2},  {"b", 3},   {"c", 4},   {"-", 5},  {" ", 6},
                {"ab", 7},    {"abc", 8},   {"a-", 9}, {"-b", 10}, {"--", 11}, {"bc", 12}};
  return json{{"version", "1.0"},
              {"added_tokens", json::array()},
              {"normalizer", nullptr},
              {"pre_tokenizer", nullptr},
              {"post_processor", nullptr},
              {"decoder", nullptr},
              {"model",
               {{"type", "BPE"},
                {"unk_token", "<unk>"},
                {"fuse_unk", true},
                {"byte_fallback", false},
                {"vocab", vocab},
                {"merges", json::array({"a b", "ab c"})}}}}
      .dump();
}

TEST(MkmodelTokenizer, CopiesACheckedTokenizerOrSaysThereIsNone) {
  const fs::path dir = make_temp_dir("mkmodel_tok");
  { std::ofstream(dir / "tiny.json") << tiny_tokenizer(); }
  { std::ofstream(dir / "broken.json") << "{ not json"; }
  const std::string config = (mini() / "config.json").string();

  const RunResult none = mkmodel({"--config", config, "--out", (dir / "none").string()});
  EXPECT_EQ(none.status, 0) << none.err;
  EXPECT_FALSE(fs::exists(dir / "none" / "tokenizer.json"));
  EXPECT_NE(none.err.find("has no tokenizer.json: infer runs it only from --prompt-ids"),
            std::string::npos)
      << none.err;

  const RunResult with = mkmodel({"--config", config, "--out", (dir / "with").string(),
                                  "--tokenizer", (dir / "tiny.json").string()});
  EXPECT_EQ(with.status, 0) << with.err;
  EXPECT_EQ(read_file(dir / "with" / "tokenizer.json"), tiny_tokenizer());
  EXPECT_EQ(with.err.find("no tokenizer"), std::string::npos) << with.err;
  // infer now takes text: "abc" is the one token 8.
  const RunResult tok =
      infer({"--model", (dir / "with").string(), "--tokenize", "-p", "abc"});
  EXPECT_EQ(tok.status, 0) << tok.err;
  EXPECT_EQ(tok.out, "8\n");

  const RunResult big = mkmodel({"--config", config, "--out", (dir / "big").string(),
                                 "--tokenizer", (vocab() / "tokenizer.json").string()});
  EXPECT_EQ(big.status, 1);
  EXPECT_NE(big.err.find("the model's vocab_size is 512"), std::string::npos) << big.err;
  EXPECT_FALSE(fs::exists(dir / "big" / "model.safetensors"));  // checked before generating

  const RunResult broken = mkmodel({"--config", config, "--out", (dir / "broken").string(),
                                    "--tokenizer", (dir / "broken.json").string()});
  EXPECT_EQ(broken.status, 1);
  EXPECT_TRUE(broken.err.starts_with("mkmodel: --tokenizer: ")) << broken.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace infer::test
