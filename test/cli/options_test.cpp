// parse_options: every switch, bad values and conflicts, and the sampling defaults taken from
// generation_config.json.
#include "cli/options.h"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace infer::cli {
namespace {

Result<Options> parse(std::vector<std::string_view> args) { return parse_options(args); }

std::string error_of(std::vector<std::string_view> args) {
  const Result<Options> r = parse(args);
  if (r.ok()) return "(parsed)";
  return r.error().message;
}

TEST(Options, ParsesTheGenerationSwitches) {
  const auto r =
      parse({"-m", "dir", "-n", "12", "--temperature", "0.7", "--top-k", "40", "--top-p=0.9",
             "--seed", "7", "--output", "ids", "--threads", "3", "hello"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->model_dir, "dir");
  EXPECT_EQ(r->max_tokens, 12);
  EXPECT_FLOAT_EQ(*r->temperature, 0.7f);
  EXPECT_EQ(*r->top_k, 40);
  EXPECT_FLOAT_EQ(*r->top_p, 0.9f);
  EXPECT_EQ(*r->seed, 7u);
  EXPECT_EQ(r->output, OutputMode::kIds);
  EXPECT_EQ(r->threads, 3);
  EXPECT_EQ(*r->prompt, "hello");
}

TEST(Options, ParsesPromptIdsWithSpacesAroundCommas) {
  const auto r = parse({"--prompt-ids", "2, 17 ,99"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r->prompt_ids, (std::vector<int32_t>{2, 17, 99}));
}

TEST(Options, RejectsBadNumbers) {
  EXPECT_EQ(error_of({"-n", "-1"}), "--max-tokens: expected an integer 0 or more, got '-1'");
  EXPECT_NE(error_of({"-n", "abc"}), "(parsed)");
  EXPECT_NE(error_of({"--temperature", "-0.5"}), "(parsed)");
  EXPECT_NE(error_of({"--temperature", "nan"}), "(parsed)");
  EXPECT_NE(error_of({"--top-p", "1.5"}), "(parsed)");
  EXPECT_NE(error_of({"--top-k", "4x"}), "(parsed)");
  EXPECT_NE(error_of({"--threads", "0"}), "(parsed)");
  EXPECT_NE(error_of({"--seed", "-3"}), "(parsed)");
  EXPECT_NE(error_of({"--prompt-ids", "2,,3"}), "(parsed)");
  EXPECT_NE(error_of({"--prompt-ids", "2,-3"}), "(parsed)");
  EXPECT_NE(error_of({"--recall", "129"}), "(parsed)");
}

TEST(Options, RejectsUnknownSwitchesAndMissingValues) {
  EXPECT_NE(error_of({"--frobnicate"}).find("unknown option '--frobnicate'"), std::string::npos);
  EXPECT_NE(error_of({"--model"}).find("needs a value"), std::string::npos);
  EXPECT_NE(error_of({"--tokenize=yes", "--prompt", "x"}).find("takes no value"),
            std::string::npos);
  EXPECT_NE(error_of({"--output", "json"}), "(parsed)");
  EXPECT_NE(error_of({"--evict", "lru"}), "(parsed)");
}

TEST(Options, RejectsConflictingSwitches) {
  EXPECT_NE(error_of({"--q4", "--q8"}).find("conflicts"), std::string::npos);
  EXPECT_NE(error_of({"--quant", "q8", "--mixed"}), "(parsed)");
  EXPECT_NE(error_of({"--prompt", "a", "b"}), "(parsed)");
  EXPECT_NE(error_of({"--prompt", "a", "--prompt-ids", "1"}), "(parsed)");
  EXPECT_NE(error_of({"--tokenize"}), "(parsed)");
  EXPECT_NE(error_of({"--bench", "--serve"}), "(parsed)");
  EXPECT_NE(error_of({"--device", "1"}).find("--gpu"), std::string::npos);
  EXPECT_TRUE(parse({"--q4", "--mixed", "--quant", "q4"}).ok());
}

TEST(Options, BenchTakesAnOptionalFile) {
  auto r = parse({"--bench", "out.json", "--q8"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->bench);
  EXPECT_EQ(r->bench_file, "out.json");
  EXPECT_EQ(r->quant, Quant::kQ8_0);
  r = parse({"--bench", "--threads", "2"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->bench_file.empty());
}

TEST(Options, LaterFeaturesParseButAreReportedUnavailable) {
  auto r = parse({"--gpu", "--device", "1"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(unavailable_feature(*r), "");  // the Vulkan backend is built
  EXPECT_EQ(unavailable_feature(*parse({"--serve"})), "");  // built
  EXPECT_EQ(unavailable_feature(*parse({"--memory"})), "");  // built
  EXPECT_EQ(unavailable_feature(*parse({"--storage", "x.mem", "--mem-capacity", "64"})), "");
  r = parse({"--tools", "/tmp"});  // built: the session runs the model's calls
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(unavailable_feature(*r), "");
  r = parse({"--gpu", "--anchors", "32", "--window", "64", "--evict", "fifo"});  // GPU ring
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(unavailable_feature(*r), "");
  r = parse({"--gpu", "--anchors", "32", "--window", "64", "--evict", "mass"});  // built too
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(unavailable_feature(*r), "");
  r = parse({"--quiescence", "--quiescence-threshold", "0.1"});  // built on the CPU path
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(unavailable_feature(*r), "");
  r = parse({"--gpu", "--quiescence", "--quiescence-threshold", "0.1"});  // and the GPU's
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(unavailable_feature(*r), "");
  EXPECT_FALSE(parse({"--bench-quiescence", "8"}).ok());  // needs --bench
  EXPECT_TRUE(parse({"--bench", "--bench-quiescence", "8"}).ok());
  r = parse({"--no-memory", "hi"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(unavailable_feature(*r), "");
  r = parse({"--trace", "t.json"});  // built: the session and --serve write it
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(unavailable_feature(*r), "");
  // The actor pipeline is built: its switches work in the interactive session.
  r = parse({"--gate-entropy", "2.5", "--consolidate-after", "3"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(unavailable_feature(*r), "");
  EXPECT_FALSE(parse({"--gate-entropy", "2.5", "hi"}).ok());  // one-shot runs have no gate
}

TEST(Options, ToolsNeedAnExistingDirectoryAndStepsNeedTools) {
  auto r = parse({"--tools", "/tmp", "--tool-steps", "3"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->tools_root, "/tmp");
  EXPECT_EQ(*r->tool_steps, 3);
  EXPECT_FALSE(parse({"--tools", "/tmp"})->tool_steps.has_value());  // the default
  EXPECT_TRUE(parse({"--tools", "/tmp", "--tool-steps", "0"}).ok());  // calls get errors
  EXPECT_EQ(error_of({"--tools", "/no/such/dir"}),
            "--tools: '/no/such/dir' does not exist (ROOT must be an existing directory)");
  EXPECT_EQ(error_of({"--tools", "/etc/passwd"}), "--tools: '/etc/passwd' is not a directory");
  EXPECT_EQ(error_of({"--tools", ""}), "--tools: ROOT is empty");
  EXPECT_EQ(error_of({"--tool-steps", "2"}), "--tool-steps needs --tools ROOT");
  EXPECT_EQ(*parse({"--tools", "/tmp", "--gate-interrupts", "2"})->gate_interrupts, 2);
  EXPECT_EQ(error_of({"--gate-interrupts", "1"}),
            "--gate-interrupts needs --tools ROOT (interrupts come from its PTYs and clients)");
  EXPECT_EQ(error_of({"--tools", "/tmp", "--gate-interrupts", "0"}),
            "--gate-interrupts: expected an integer 1 to 1048576, got '0'");
  EXPECT_EQ(error_of({"--tools", "/tmp", "--tool-steps", "-1"}),
            "--tool-steps: expected an integer 0 to 1024, got '-1'");
  EXPECT_NE(error_of({"--tools", "/tmp", "hi"}).find("--tools applies to"), std::string::npos);
  EXPECT_TRUE(parse({"--tools", "/tmp", "--chat", "hi"}).ok());
  EXPECT_TRUE(parse({"--tools", "/tmp", "--serve"}).ok());
  EXPECT_TRUE(parse({"--tools", "/tmp", "--bench"}).ok());
  EXPECT_NE(error_of({"--tools", "/tmp", "--bench", "--bench-stream", "9"}).find("idle cost"),
            std::string::npos);
}

TEST(Options, KvRingSwitchesRunOnTheCpuAndBenchStreamNeedsBench) {
  auto r = parse({"--anchors", "4", "--window", "64", "--recall", "8", "--evict", "mass", "hi"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(unavailable_feature(*r), "");
  EXPECT_EQ(*r->evict, EvictPolicy::kMass);
  EXPECT_FALSE(parse({"--recall", "129"}).ok());
  r = parse({"--bench", "--bench-stream", "5000", "--bench-every", "100"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r->bench_stream, 5000);
  r = parse({"--bench", "--bench-context", "1024,8192"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r->bench_context, (std::vector<int64_t>{1024, 8192}));
  EXPECT_FALSE(parse({"--bench-stream", "10"}).ok());
  EXPECT_FALSE(parse({"--bench", "--bench-every", "10"}).ok());
}

TEST(Options, SamplingIsGreedyWithoutFlagsOrDoSample) {
  const auto r = parse({"hi", "--seed", "5"});
  ASSERT_TRUE(r.ok());
  const SamplingParams p = resolve_sampling(*r, GenerationConfig{});
  EXPECT_EQ(p.temperature, 0.0f);
  EXPECT_EQ(p.seed, 5u);
}

TEST(Options, SamplingTakesGenerationConfigDefaultsAndFlagsWin) {
  GenerationConfig gen;
  gen.do_sample = true;
  gen.temperature = 0.8f;
  gen.top_k = 64;
  gen.top_p = 0.95f;
  auto r = parse({"hi"});
  SamplingParams p = resolve_sampling(*r, gen);
  EXPECT_FLOAT_EQ(p.temperature, 0.8f);
  EXPECT_EQ(p.top_k, 64);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);

  r = parse({"hi", "--top-k", "5", "--temperature", "1.2"});
  p = resolve_sampling(*r, gen);
  EXPECT_FLOAT_EQ(p.temperature, 1.2f);
  EXPECT_EQ(p.top_k, 5);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);

  r = parse({"hi", "--temperature", "0"});
  EXPECT_EQ(resolve_sampling(*r, gen).temperature, 0.0f);
}

TEST(Options, TopKAloneTurnsSamplingOnWithHfDefaults) {
  const auto r = parse({"hi", "--top-k", "3"});
  const SamplingParams p = resolve_sampling(*r, GenerationConfig{});
  EXPECT_FLOAT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_k, 3);
  EXPECT_FLOAT_EQ(p.top_p, 1.0f);
}

TEST(Options, DoubleDashEndsTheSwitches) {
  const auto r = parse({"--", "--not-a-switch"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r->prompt, "--not-a-switch");
}

// --gpu-tune: keys and values of gpu/tuning.h, kept in order for the context to apply; an
// unknown key names the keys there are, a bad value what the key takes.
TEST(Options, ParsesGpuTuneOverrides) {
  const auto r = parse({"--gpu", "--gpu-tune", "int_dot=on,mm_tile=64x128", "--gpu-tune",
                        "attn_split_tile=16", "--prefill-chunk", "96"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const gpu::TuningOverrides want = {{"int_dot", "on"}, {"mm_tile", "64x128"},
                                     {"attn_split_tile", "16"}};
  EXPECT_EQ(r->gpu_tune, want);
  EXPECT_EQ(*r->prefill_chunk, 96);
}

TEST(Options, RejectsAnUnknownGpuTuneKey) {
  const std::string e = error_of({"--gpu", "--gpu-tune", "int_dots=on"});
  EXPECT_NE(e.find("unknown key \"int_dots\""), std::string::npos) << e;
  EXPECT_NE(e.find("int_dot,"), std::string::npos) << e;  // the keys there are
}

TEST(Options, RejectsABadGpuTuneValue) {
  std::string e = error_of({"--gpu", "--gpu-tune", "mm_tile=128by64"});
  EXPECT_NE(e.find("mm_tile takes ROWSxTOKENS"), std::string::npos) << e;
  e = error_of({"--gpu", "--gpu-tune", "attn_split_tile=12"});
  EXPECT_NE(e.find("attn_split_tile takes 8, 16 or 32"), std::string::npos) << e;
  e = error_of({"--gpu", "--gpu-tune", "int_dot"});
  EXPECT_NE(e.find("is not key=value"), std::string::npos) << e;
  EXPECT_NE(error_of({"--gpu", "--gpu-tune", "mm_stages=3"}), "(parsed)");
  EXPECT_NE(error_of({"--gpu", "--prefill-chunk", "0"}), "(parsed)");
  EXPECT_EQ(error_of({"--gpu-tune", "int_dot=on"}), "--gpu-tune needs --gpu");
  EXPECT_EQ(error_of({"--prefill-chunk", "64"}), "--prefill-chunk needs --gpu");
}

}  // namespace
}  // namespace infer::cli
