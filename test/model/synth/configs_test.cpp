// configs/*.json: the published sizes parse to the plans of GEMMA4_TEXT.md §3.2 and §8, give the
// §7 tensor shapes, and the 12B (our assumption) reads about 6.7 GB per Q4_0 decode step.
#include <gtest/gtest.h>

#include "model/config.h"
#include "model/safetensors.h"
#include "model/synth/synth_model.h"
#include "model/tensor_table.h"
#include "test/model/synth/temp_dir.h"
#include "test/test_paths.h"

namespace infer {
namespace {

ModelConfig load(const char* name) {
  const std::string text = test::read_file(test::configs_dir() / (std::string(name) + ".json"));
  Result<ModelConfig> cfg = parse_config(text, name);
  EXPECT_TRUE(cfg.ok()) << name << ": " << cfg.error().message;
  return cfg.ok() ? *cfg : ModelConfig{};
}

std::vector<int> full_layers(const ModelConfig& cfg) {
  std::vector<int> out;
  for (size_t i = 0; i < cfg.layers.size(); ++i) {
    if (cfg.layers[i].type == LayerType::kFull) out.push_back(static_cast<int>(i));
  }
  return out;
}

std::vector<int64_t> shape_of(const ModelConfig& cfg, const std::string& name) {
  for (const TensorSpec& t : expected_tensors(cfg)) {
    if (t.name == name) return t.shape;
  }
  ADD_FAILURE() << name << " is not in the table";
  return {};
}

TEST(SynthConfigs, E2BHasTheSpecPlanAndShapes) {
  const ModelConfig cfg = load("e2b");
  ASSERT_EQ(cfg.layers.size(), 35u);
  EXPECT_TRUE(cfg.is_wrapper);
  EXPECT_EQ(full_layers(cfg), (std::vector<int>{4, 9, 14, 19, 24, 29, 34}));
  EXPECT_EQ(cfg.first_kv_shared, 15);
  EXPECT_EQ(cfg.layers[15].kv_source, 13);
  EXPECT_EQ(cfg.layers[19].kv_source, 14);
  EXPECT_EQ(cfg.layers[4].head_dim, 512);
  EXPECT_EQ(cfg.layers[0].head_dim, 256);
  EXPECT_EQ(cfg.layers[14].mlp_intermediate, 6144);
  EXPECT_EQ(cfg.layers[15].mlp_intermediate, 12288);
  EXPECT_EQ(cfg.text.final_logit_softcapping, 30.0);
  // §7.1
  EXPECT_EQ(shape_of(cfg, "embed_tokens_per_layer.weight"), (std::vector<int64_t>{262144, 8960}));
  EXPECT_EQ(shape_of(cfg, "per_layer_model_projection.weight"), (std::vector<int64_t>{8960, 1536}));
  EXPECT_EQ(shape_of(cfg, "layers.4.self_attn.q_proj.weight"), (std::vector<int64_t>{4096, 1536}));
  EXPECT_EQ(shape_of(cfg, "layers.4.self_attn.v_proj.weight"), (std::vector<int64_t>{512, 1536}));
  EXPECT_EQ(shape_of(cfg, "layers.19.mlp.down_proj.weight"), (std::vector<int64_t>{1536, 12288}));
}

TEST(SynthConfigs, E4BHasTheSpecPlan) {
  const ModelConfig cfg = load("e4b");
  ASSERT_EQ(cfg.layers.size(), 42u);
  EXPECT_EQ(cfg.text.hidden_size, 2560);
  EXPECT_EQ(full_layers(cfg).front(), 5);
  EXPECT_EQ(full_layers(cfg).size(), 7u);
  EXPECT_EQ(cfg.first_kv_shared, 24);
  EXPECT_EQ(cfg.layers[24].kv_source, 22);
  EXPECT_EQ(cfg.layers[29].kv_source, 23);
  EXPECT_EQ(shape_of(cfg, "layers.11.self_attn.k_proj.weight"), (std::vector<int64_t>{1024, 2560}));
  EXPECT_EQ(shape_of(cfg, "layers.30.mlp.up_proj.weight"), (std::vector<int64_t>{10240, 2560}));
}

TEST(SynthConfigs, ThirtyOneBReusesKAsVOnFullLayers) {
  const ModelConfig cfg = load("31b");
  ASSERT_EQ(cfg.layers.size(), 60u);
  EXPECT_EQ(full_layers(cfg).size(), 10u);
  EXPECT_EQ(cfg.text.hidden_size_per_layer_input, 0);
  EXPECT_EQ(cfg.text.sliding_window, 1024);
  EXPECT_TRUE(cfg.layers[5].k_eq_v);
  EXPECT_EQ(cfg.layers[5].num_key_value_heads, 4);
  EXPECT_EQ(cfg.layers[4].num_key_value_heads, 16);
  EXPECT_EQ(shape_of(cfg, "layers.5.self_attn.k_proj.weight"), (std::vector<int64_t>{2048, 5376}));
  EXPECT_EQ(shape_of(cfg, "layers.34.self_attn.k_proj.weight"), (std::vector<int64_t>{4096, 5376}));
  EXPECT_EQ(shape_of(cfg, "layers.0.mlp.gate_proj.weight"), (std::vector<int64_t>{21504, 5376}));
}

TEST(SynthConfigs, TwentySixBHasTheExpertBranch) {
  const ModelConfig cfg = load("26b-a4b");
  ASSERT_EQ(cfg.layers.size(), 30u);
  EXPECT_TRUE(cfg.text.enable_moe_block);
  EXPECT_EQ(cfg.text.num_experts, 128);
  EXPECT_EQ(cfg.text.top_k_experts, 8);
  EXPECT_EQ(cfg.layers[5].num_key_value_heads, 2);
  EXPECT_EQ(shape_of(cfg, "layers.0.experts.gate_up_proj"),
            (std::vector<int64_t>{128, 1408, 2816}));
  EXPECT_EQ(shape_of(cfg, "layers.0.experts.down_proj"), (std::vector<int64_t>{128, 2816, 704}));
  EXPECT_EQ(shape_of(cfg, "layers.0.mlp.down_proj.weight"), (std::vector<int64_t>{2816, 2112}));
}

TEST(SynthConfigs, TwelveBIsDenseWithAThousandTokenWindow) {
  const ModelConfig cfg = load("12b");
  ASSERT_EQ(cfg.layers.size(), 48u);
  EXPECT_EQ(cfg.text.hidden_size, 3840);
  EXPECT_EQ(cfg.text.hidden_size_per_layer_input, 0);
  EXPECT_EQ(cfg.text.sliding_window, 1024);
  EXPECT_EQ(cfg.first_kv_shared, 48);
  EXPECT_EQ(full_layers(cfg).size(), 8u);
}

// Bytes of one decode step with Quant::kQ4_0 (weights.h): projections and experts' active rows
// as Q4_0 (18 bytes per 32 weights), the tied head as Q8_0 (34 per 32). Embedding rows and norms
// are a few MB and left out. Only top_k of the experts are read.
double q4_decode_gb(const ModelConfig& cfg) {
  double bytes = 0;
  for (const TensorSpec& t : expected_tensors(cfg)) {
    double n = 1;
    for (int64_t d : t.shape) n *= static_cast<double>(d);
    if (t.name == "embed_tokens.weight") bytes += n * 34 / 32;
    if (t.kind == TensorKind::kMatrix) bytes += n * 18 / 32;
    if (t.kind == TensorKind::kExperts)
      bytes += n / cfg.text.num_experts * cfg.text.top_k_experts * 18 / 32;
  }
  return bytes / 1e9;
}

TEST(SynthConfigs, TwelveBReadsAboutSixPointSevenGigabytesPerQ4Token) {
  EXPECT_NEAR(q4_decode_gb(load("12b")), 6.7, 0.05);
}

TEST(SynthConfigs, CheckpointSizesMatchTheParameterCounts) {
  // bf16 bytes = 2 × parameters (text decoder only, tied head not stored).
  EXPECT_NEAR(double(random_checkpoint_bytes(load("e2b"), DType::kBF16)) / 1e9, 9.26, 0.05);
  EXPECT_NEAR(double(random_checkpoint_bytes(load("12b"), DType::kBF16)) / 1e9, 22.0, 0.1);
  EXPECT_NEAR(double(random_checkpoint_bytes(load("26b-a4b"), DType::kBF16)) / 1e9, 50.5, 0.2);
  EXPECT_NEAR(double(random_checkpoint_bytes(load("31b"), DType::kBF16)) / 1e9, 61.4, 0.2);
}

}  // namespace
}  // namespace infer
