// build/infer as a subprocess: errors and exit codes, --tokenize and greedy generation against
// the golden fixtures, --dump-logits, --bench JSON, seeded sampling and the demo model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test/cli/subprocess.h"
#include "test/test_paths.h"

namespace infer::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

RunResult infer(const std::vector<std::string>& args) { return run_binary(infer_binary(), args); }

// `infer --gpu ...` under the sanitizers: Debian 12's Vulkan loader (1.3.239, which ignores
// VK_LOADER_DISABLE_DYNAMIC_LIBRARY_UNLOADING) unloads lavapipe and its LLVM when the instance
// goes, so LeakSanitizer finds a 128-byte block of theirs unreferenced and cannot name its
// module (Mesa 22.3.6-1+deb12u2); with the libraries preloaded, and so never
// unloaded, nothing leaks. So leak checking is off for these runs only; gpu_test checks our
// GPU code for leaks with the drivers pinned (test/gpu/gpu_test_env.cpp). These options replace
// the suite's, whose verify_asan_link_order=0 they keep: .ci/run preloads a block cache ahead of
// the ASan runtime (test/sanitizers/big_block_cache.c).
constexpr const char* kAsanNoLeaks = "detect_leaks=0:abort_on_error=1:verify_asan_link_order=0";
RunResult infer_gpu(const std::vector<std::string>& args) {
  return run_binary(infer_binary(), args, {{"ASAN_OPTIONS", kAsanNoLeaks}});
}

fs::path fixture(const std::string& name) { return repo_fixtures() / "gemma4-text" / name; }
fs::path vocab_fixture() { return shared_fixtures() / "gemma4-text" / "e2b-vocab"; }

json read_json(const fs::path& p) {
  return json::parse(read_file(p), nullptr, /*allow_exceptions=*/false);
}

std::string join(const std::vector<int>& ids, const char* sep) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) s += sep;
    s += std::to_string(ids[i]);
  }
  return s;
}

// stderr is exactly one line, "infer: ...".
void expect_one_error_line(const RunResult& r) {
  EXPECT_TRUE(r.err.starts_with("infer: ")) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(InferCli, MissingModelDirFailsWithOneLine) {
  const RunResult r = infer({"--model", "/nonexistent/model/dir", "--prompt", "hi"});
  EXPECT_EQ(r.status, 1);
  expect_one_error_line(r);
  EXPECT_NE(r.err.find("/nonexistent/model/dir"), std::string::npos) << r.err;
}

TEST(InferCli, CorruptModelFailsWithOneLine) {
  const fs::path dir = make_temp_dir("corrupt");
  fs::copy(fixture("e2b-mini") / "config.json", dir / "config.json");
  { std::ofstream(dir / "model.safetensors") << "not a safetensors file"; }
  const RunResult r = infer({"--model", dir.string(), "--prompt-ids", "2,3", "--output", "ids"});
  EXPECT_EQ(r.status, 1);
  expect_one_error_line(r);
  fs::remove_all(dir);
}

TEST(InferCli, BadSwitchesExitWithStatusTwo) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--frobnicate"},
                                               {"-n", "-1"},
                                               {"-n", "ten"},
                                               {"--q4", "--q8"},
                                               {"--temperature", "hot"},
                                               {"--top-p", "2"},
                                               {"--recall", "200"},
                                               {"--model"},
                                               {"--output", "xml"},
                                               {"--prompt-ids", "1,x"}}) {
    const RunResult r = infer(args);
    EXPECT_EQ(r.status, 2) << args[0];
    expect_one_error_line(r);
  }
}

// --serve is built (test/serve drives it through the Python client); stdin is /dev/null here:
// EOF before any frame is a clean shutdown with nothing on stdout.
TEST(InferCli, ServeWithEmptyInputExitsCleanly) {
  const RunResult r = infer({"--serve", "--model", fixture("e2b-mini").string()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "");
}

// --gpu on lavapipe in CI: the golden greedy tokens, the device report on stderr.
TEST(InferCli, GpuGreedyIdsMatchTheGoldenTokens) {
  const json golden = read_json(fixture("e2b-mini") / "golden.json");
  const auto prompt = golden["prompt_ids"].get<std::vector<int>>();
  const auto expected = golden["greedy_tokens"].get<std::vector<int>>();
  const RunResult r =
      infer_gpu({"--gpu", "--model", fixture("e2b-mini").string(), "--prompt-ids",
                 join(prompt, ","), "-n", std::to_string(expected.size()), "--output", "ids",
                 "--temperature", "0"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, join(expected, " ") + "\n");
  EXPECT_NE(r.err.find("device:"), std::string::npos) << r.err;
  // On a CPU rasterizer (lavapipe in CI) the run says so and points at the CPU backend; on a
  // GPU it says nothing of the kind.
  const bool cpu_device = r.err.find(" (CPU), Vulkan") != std::string::npos;
  EXPECT_EQ(r.err.find("is a CPU rasterizer, not a GPU") != std::string::npos, cpu_device)
      << r.err;
  if (cpu_device) {
    EXPECT_NE(r.err.find("run without --gpu"), std::string::npos) << r.err;
  }
}

// --prefill-chunk: the prompt fed in ragged chunks of 5 gives the same tokens; a chunk that is no
// count is refused before anything runs.
TEST(InferCli, GpuPrefillChunkFlagKeepsTheTokensAndRefusesBadValues) {
  const json golden = read_json(fixture("e2b-mini") / "golden.json");
  const auto prompt = golden["prompt_ids"].get<std::vector<int>>();
  const auto expected = golden["greedy_tokens"].get<std::vector<int>>();
  auto args = [&](const std::string& chunk) {
    return std::vector<std::string>{"--gpu", "--prefill-chunk", chunk, "--model",
                                    fixture("e2b-mini").string(), "--prompt-ids",
                                    join(prompt, ","), "-n", std::to_string(expected.size()),
                                    "--output", "ids", "--temperature", "0"};
  };
  const std::pair<std::string, std::string> no_leaks{"ASAN_OPTIONS", kAsanNoLeaks};
  const RunResult r = run_binary(infer_binary(), args("5"), {no_leaks});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, join(expected, " ") + "\n");
  for (const char* bad : {"0", "-3", "many", "12x"}) {
    const RunResult b = run_binary(infer_binary(), args(bad), {no_leaks});
    EXPECT_NE(b.status, 0) << bad;
    EXPECT_NE(b.err.find("--prefill-chunk"), std::string::npos) << b.err;
    EXPECT_EQ(b.out, "") << bad;
  }
}

TEST(InferCli, HelpListsTheSwitches) {
  const RunResult r = infer({"--help"});
  EXPECT_EQ(r.status, 0);
  for (const char* s : {"--model", "--max-tokens", "--prompt-ids", "--temperature", "--bench",
                        "--dump-logits", "--tokenize", "--q8", "--recall"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  }
}

TEST(InferCli, TokenizePrintsTheGoldenIds) {
  const json golden = read_json(vocab_fixture() / "golden.json");
  ASSERT_TRUE(golden.contains("prompts"));
  for (const json& p : golden["prompts"]) {
    const RunResult r = infer({"--tokenize", "--model", vocab_fixture().string(), "--prompt",
                               p["text"].get<std::string>()});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, join(p["ids"].get<std::vector<int>>(), " ") + "\n");
  }
}

TEST(InferCli, GreedyIdsMatchTheGoldenTokens) {
  for (const char* name : {"e2b-mini", "dense-mini", "moe-mini"}) {
    const json golden = read_json(fixture(name) / "golden.json");
    const auto prompt = golden["prompt_ids"].get<std::vector<int>>();
    const auto expected = golden["greedy_tokens"].get<std::vector<int>>();
    const RunResult r = infer({"--model", fixture(name).string(), "--prompt-ids", join(prompt, ","),
                               "--temperature", "0", "-n", "16", "--output", "ids"});
    EXPECT_EQ(r.status, 0) << name << ": " << r.err;
    EXPECT_EQ(r.out, join(expected, " ") + "\n") << name;
    EXPECT_NE(r.err.find("decode: 15 tokens"), std::string::npos) << r.err;
  }
}

// No prompt with stdin /dev/null (as run_binary gives it) is nothing to do: no model is loaded,
// no text comes out; --prompt-ids 2 is how to generate from <bos>.
TEST(InferCli, WithoutAPromptAndAnEmptyStdinThereIsNothingToDo) {
  const RunResult bare = infer({"--model", fixture("e2b-mini").string(), "-n", "6", "--output",
                                "ids"});
  EXPECT_EQ(bare.status, 0) << bare.err;
  EXPECT_EQ(bare.out, "");
  EXPECT_NE(bare.err.find("nothing to do"), std::string::npos) << bare.err;
  EXPECT_EQ(bare.err.find("load:"), std::string::npos) << bare.err;
  // e2b-mini has no tokenizer.json: ids out need none (this run used to crash on it).
  const RunResult bos = infer({"--model", fixture("e2b-mini").string(), "--prompt-ids", "2", "-n",
                               "6", "--output", "ids"});
  EXPECT_EQ(bos.status, 0) << bos.err;
  EXPECT_EQ(std::count(bos.out.begin(), bos.out.end(), ' '), 5) << bos.out;
}

TEST(InferCli, GenerationStopsAtAnEosIdFromGenerationConfig) {
  // e2b-mini's greedy continuation is 343 497 400 ...: make 400 an end token.
  const fs::path dir = make_temp_dir("eos");
  for (const char* f : {"config.json", "model.safetensors"}) {
    fs::copy(fixture("e2b-mini") / f, dir / f);
  }
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [1, 400]})";
  const json golden = read_json(fixture("e2b-mini") / "golden.json");
  const auto prompt = golden["prompt_ids"].get<std::vector<int>>();
  const RunResult r = infer(
      {"--model", dir.string(), "--prompt-ids", join(prompt, ","), "-n", "16", "--output", "ids"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "343 497\n");
  EXPECT_NE(r.err.find("stopped by an end token"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(InferCli, GreedyTextFromATextPromptMatchesTheGoldenText) {
  const json golden = read_json(vocab_fixture() / "golden.json");
  const json& p = golden["prompts"][0];
  const RunResult r = infer({"--model", vocab_fixture().string(), "--prompt",
                             p["text"].get<std::string>(), "--temperature", "0", "-n", "16"});
  EXPECT_EQ(r.status, 0) << r.err;
  // The text ends with a newline, so the timing lines never run into it.
  EXPECT_EQ(r.out, p["greedy_text"].get<std::string>() + "\n");
}

TEST(InferCli, DumpLogitsWritesThePromptLogits) {
  const json golden = read_json(fixture("e2b-mini") / "golden.json");
  const auto prompt = golden["prompt_ids"].get<std::vector<int>>();
  const auto expected = golden["prompt_logits"].get<std::vector<std::vector<float>>>();
  const fs::path dir = make_temp_dir("dump");
  const fs::path dump = dir / "logits.f32";
  const RunResult r =
      infer({"--model", fixture("e2b-mini").string(), "--prompt-ids", join(prompt, ","), "-n", "0",
             "--output", "ids", "--dump-logits", dump.string()});
  EXPECT_EQ(r.status, 0) << r.err;
  const std::string bytes = read_file(dump);
  const size_t V = expected.at(0).size();
  ASSERT_EQ(bytes.size(), prompt.size() * V * sizeof(float));
  float max_diff = 0.0f;
  for (size_t t = 0; t < prompt.size(); ++t) {
    for (size_t v = 0; v < V; ++v) {
      float x;
      std::memcpy(&x, bytes.data() + (t * V + v) * sizeof(float), sizeof x);
      max_diff = std::max(max_diff, std::abs(x - expected[t][v]));
    }
  }
  EXPECT_LE(max_diff, 2e-3f);
  fs::remove_all(dir);
}

TEST(InferCli, ASeedReproducesASampledContinuation) {
  const std::vector<std::string> base = {"--model",
                                         fixture("e2b-mini").string(),
                                         "--prompt-ids",
                                         "2,17,99",
                                         "--temperature",
                                         "1",
                                         "-n",
                                         "24",
                                         "--output",
                                         "ids"};
  auto with_seed = [&](const char* seed) {
    auto args = base;
    args.insert(args.end(), {"--seed", seed});
    return infer(args);
  };
  const RunResult a = with_seed("11"), b = with_seed("11"), c = with_seed("12");
  EXPECT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST(InferCli, PromptIdsOutsideTheVocabularyAreAUsageError) {
  const RunResult r = infer(
      {"--model", fixture("e2b-mini").string(), "--prompt-ids", "2,100000", "--output", "ids"});
  EXPECT_EQ(r.status, 2);
  expect_one_error_line(r);
}

TEST(InferCli, BenchEmitsJsonWithEveryKey) {
  const fs::path dir = make_temp_dir("bench");
  const fs::path out = dir / "bench.json";
  const RunResult r = infer(
      {"--bench", out.string(), "--model", fixture("e2b-mini").string(), "--threads", "2", "--q8"});
  EXPECT_EQ(r.status, 0) << r.err;
  const json j = read_json(out);
  ASSERT_TRUE(j.is_object()) << read_file(out);
  for (const char* key :
       {"model_dir", "quant", "weight_format", "head_format", "threads", "isa", "load_s",
        "prefill_tokens", "prefill_tokens_per_s", "decode_tokens", "decode_tokens_per_s",
        "decode_ms_per_token_median", "decode_bytes_per_token", "memory_bandwidth_gb_per_s",
        "memory_bandwidth_gb_per_s_median", "decode_bandwidth_fraction", "peak_rss_bytes",
        "tokenizer_encode_mb_per_s"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["quant"], "q8");
  EXPECT_EQ(j["threads"], 2);
  EXPECT_EQ(j["prefill_tokens"], 512);
  EXPECT_GT(j["decode_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["memory_bandwidth_gb_per_s"].get<double>(), 0.0);
  EXPECT_TRUE(j["tokenizer_encode_mb_per_s"].is_null());  // e2b-mini has no tokenizer.json
  fs::remove_all(dir);
}

// --gpu: the same keys, the device's read bandwidth as the bound with the copy beside it, and
// what a decode token records (lavapipe in CI).
TEST(InferCli, GpuBenchEmitsBandwidthAndDispatchCounts) {
  const fs::path dir = make_temp_dir("bench-gpu");
  const fs::path out = dir / "bench.json";
  const RunResult r = infer_gpu({"--bench", out.string(), "--gpu", "--model",
                                 fixture("e2b-mini").string(), "--threads", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = read_json(out);
  ASSERT_TRUE(j.is_object()) << read_file(out);
  EXPECT_EQ(j["backend"], "vulkan");
  for (const char* key : {"memory_bandwidth_gb_per_s", "memory_bandwidth_copy_gb_per_s",
                          "decode_tokens_per_s"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    EXPECT_GT(j[key].get<double>(), 0.0) << key;
  }
  // e2b-mini: 7 layers of at most 13 dispatches (PLE; attention is two at decode) and 7 outside.
  for (const char* key : {"decode_dispatches_per_token", "decode_barriers_per_token",
                          "decode_buffer_barriers_per_token"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    EXPECT_GT(j[key].get<int>(), 0) << key;
  }
  EXPECT_LE(j["decode_dispatches_per_token"].get<int>(), 7 * 13 + 7);
  EXPECT_LE(j["decode_barriers_per_token"].get<int>(), j["decode_dispatches_per_token"].get<int>());
  EXPECT_NE(r.err.find("dispatches"), std::string::npos) << r.err;
  // The probes of what ordering costs are bench/gpu_probes', not infer's.
  EXPECT_FALSE(j.contains("sync_dependent_dispatch_us"));
  // Every tuning knob with the value the run took (gpu/tuning.h): e2b-mini is narrower than the
  // integer dots' threshold, and lavapipe has fewer than 64 compute cores.
  ASSERT_TRUE(j.contains("gpu_tuning")) << read_file(out);
  const json& t = j["gpu_tuning"];
  EXPECT_EQ(t["int_dot"], "off");
  EXPECT_EQ(t["prefill_chunk"], 256);
  EXPECT_EQ(t["long_row_cols"], 8192);
  EXPECT_EQ(t["mm_tile"], "128x128");
  EXPECT_EQ(t["attn_split"], "auto");
  fs::remove_all(dir);
}

// --model CONFIG.json generates the random model in memory: the same weights mkmodel writes with
// seed 1, so the same greedy ids.
TEST(InferCli, AConfigFileRunsTheRandomModelMkmodelWrites) {
  const fs::path dir = make_temp_dir("random");
  const fs::path config = fixture("e2b-mini") / "config.json";
  const RunResult made = run_binary(infer_binary().parent_path() / "mkmodel",
                                    {"--config", config.string(), "--out", dir.string(), "--seed", "1"});
  ASSERT_EQ(made.status, 0) << made.err;
  const std::vector<std::string> args = {"--prompt-ids", "2,17,99", "-n", "8", "--output", "ids",
                                         "--temperature", "0"};
  std::vector<std::string> from_dir = {"--model", dir.string()};
  std::vector<std::string> from_config = {"--model", config.string()};
  from_dir.insert(from_dir.end(), args.begin(), args.end());
  from_config.insert(from_config.end(), args.begin(), args.end());
  const RunResult a = infer(from_dir);
  const RunResult b = infer(from_config);
  EXPECT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(b.status, 0) << b.err;
  EXPECT_FALSE(a.out.empty());
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(b.err.find("random bf16 weights"), std::string::npos) << b.err;
  const RunResult missing = infer({"--model", (dir / "nothere.json").string(), "--prompt-ids", "2"});
  EXPECT_EQ(missing.status, 1);
  expect_one_error_line(missing);
  fs::remove_all(dir);
}

TEST(InferCli, TheDemoModelGeneratesTextAndSaysItIsRandom) {
  const fs::path home = make_temp_dir("home");
  const fs::path cwd = home / "work";  // no ../gemma-4-E2B beside it
  fs::create_directories(cwd);
  const RunResult r =
      run_binary(infer_binary(), {"--prompt", "Once upon a time", "-n", "12", "--seed", "1"},
                 {{"HOME", home.string()}, {"XDG_CACHE_HOME", (home / "cache").string()}}, cwd);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  EXPECT_NE(r.err.find("demo model"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("random"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(home / "cache" / "infer")) << "the demo model was not cached";
  fs::remove_all(home);
}

}  // namespace
}  // namespace infer::test
