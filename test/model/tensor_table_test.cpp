// The tensor table: expected_tensors() equals every fixture's golden tensor list and §7's shapes;
// validate_tensors() accepts the fixtures and tolerated extras, and names what is wrong otherwise.
#include "model/tensor_table.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/safetensors.h"
#include "test/test_paths.h"

namespace infer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Shape = std::vector<int64_t>;

std::map<std::string, Shape> by_name(const std::vector<TensorSpec>& specs) {
  std::map<std::string, Shape> out;
  for (const TensorSpec& s : specs) EXPECT_TRUE(out.emplace(s.name, s.shape).second) << s.name;
  return out;
}

TEST(TensorTable, EveryFixtureMatchesItsGoldenTensorListAndValidates) {
  for (const char* name : {"dense-mini", "e2b-long", "e2b-mini", "moe-mini"}) {
    SCOPED_TRACE(name);
    const fs::path dir = test::repo_fixtures() / "gemma4-text" / name;
    auto cfg = load_config(dir);
    ASSERT_TRUE(cfg.ok()) << cfg.error().message;
    std::map<std::string, Shape> want;
    const json golden = json::parse(test::read_file(dir / "golden.json"));
    for (const auto& [raw, shape] : golden["tensors"].items()) {
      ASSERT_EQ(raw.rfind("model.language_model.", 0), 0u) << raw;
      want[raw.substr(21)] = shape.get<Shape>();
    }
    EXPECT_EQ(by_name(expected_tensors(*cfg)), want);
    auto store = TensorStore::open(dir);
    ASSERT_TRUE(store.ok()) << store.error().message;
    auto v = validate_tensors(*cfg, *store);
    EXPECT_TRUE(v.ok()) << v.error().message;
  }
}

TEST(TensorTable, E2bVocabFixtureValidates) {
  const fs::path dir = test::shared_fixtures() / "gemma4-text" / "e2b-vocab";
  auto cfg = load_config(dir);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  auto store = TensorStore::open(dir);
  ASSERT_TRUE(store.ok()) << store.error().message;
  auto v = validate_tensors(*cfg, *store);
  EXPECT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(expected_tensors(*cfg).size(), store->size());
}

ModelConfig parse_or_die(const json& j) {
  auto m = parse_config(j.dump());
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? *m : ModelConfig{};
}

TEST(TensorTable, E2bShapesAreThoseOfSpecSection7) {
  json types = json::array();
  for (int i = 0; i < 35; ++i) types.push_back(i % 5 == 4 ? "full_attention" : "sliding_attention");
  const auto t = by_name(expected_tensors(parse_or_die(
      {{"model_type", "gemma4_text"}, {"hidden_size", 1536}, {"intermediate_size", 6144},
       {"num_hidden_layers", 35}, {"num_attention_heads", 8}, {"num_key_value_heads", 1},
       {"num_kv_shared_layers", 20}, {"use_double_wide_mlp", true}, {"layer_types", types}})));
  EXPECT_EQ(t.at("embed_tokens.weight"), (Shape{262144, 1536}));
  EXPECT_EQ(t.at("embed_tokens_per_layer.weight"), (Shape{262144, 8960}));
  EXPECT_EQ(t.at("per_layer_model_projection.weight"), (Shape{8960, 1536}));
  EXPECT_EQ(t.at("per_layer_projection_norm.weight"), (Shape{256}));
  EXPECT_EQ(t.at("layers.0.self_attn.q_proj.weight"), (Shape{2048, 1536}));
  EXPECT_EQ(t.at("layers.0.self_attn.k_proj.weight"), (Shape{256, 1536}));
  EXPECT_EQ(t.at("layers.4.self_attn.q_proj.weight"), (Shape{4096, 1536}));
  EXPECT_EQ(t.at("layers.4.self_attn.v_proj.weight"), (Shape{512, 1536}));
  EXPECT_EQ(t.at("layers.4.self_attn.o_proj.weight"), (Shape{1536, 4096}));
  EXPECT_EQ(t.at("layers.19.self_attn.q_norm.weight"), (Shape{512}));
  EXPECT_EQ(t.count("layers.15.self_attn.k_proj.weight"), 0u);
  EXPECT_EQ(t.count("layers.19.self_attn.k_norm.weight"), 0u);
  EXPECT_EQ(t.at("layers.14.mlp.gate_proj.weight"), (Shape{6144, 1536}));
  EXPECT_EQ(t.at("layers.15.mlp.up_proj.weight"), (Shape{12288, 1536}));
  EXPECT_EQ(t.at("layers.34.mlp.down_proj.weight"), (Shape{1536, 12288}));
  EXPECT_EQ(t.at("layers.34.per_layer_input_gate.weight"), (Shape{256, 1536}));
  EXPECT_EQ(t.at("layers.34.per_layer_projection.weight"), (Shape{1536, 256}));
  EXPECT_EQ(t.at("layers.34.layer_scalar"), (Shape{1}));
}

TEST(TensorTable, MoeKeqvAndBiasTensors) {
  // 26B-A4B per §7.2, cut to two layers.
  const auto m = parse_or_die({{"model_type", "gemma4_text"}, {"hidden_size", 2816},
                               {"intermediate_size", 2112}, {"num_hidden_layers", 2},
                               {"num_attention_heads", 16}, {"num_key_value_heads", 8},
                               {"num_global_key_value_heads", 2}, {"attention_k_eq_v", true},
                               {"hidden_size_per_layer_input", 0}, {"enable_moe_block", true},
                               {"num_experts", 128}, {"top_k_experts", 8},
                               {"moe_intermediate_size", 704}, {"attention_bias", true}});
  const auto t = by_name(expected_tensors(m));
  EXPECT_EQ(t.at("layers.0.self_attn.v_proj.weight"), (Shape{2048, 2816}));
  EXPECT_EQ(t.at("layers.1.self_attn.q_proj.weight"), (Shape{8192, 2816}));
  EXPECT_EQ(t.at("layers.1.self_attn.k_proj.weight"), (Shape{1024, 2816}));
  EXPECT_EQ(t.count("layers.1.self_attn.v_proj.weight"), 0u);
  EXPECT_EQ(t.count("layers.1.self_attn.v_proj.bias"), 0u);
  EXPECT_EQ(t.at("layers.1.self_attn.k_proj.bias"), (Shape{1024}));
  EXPECT_EQ(t.at("layers.1.self_attn.o_proj.bias"), (Shape{2816}));
  EXPECT_EQ(t.at("layers.1.router.proj.weight"), (Shape{128, 2816}));
  EXPECT_EQ(t.at("layers.1.router.scale"), (Shape{2816}));
  EXPECT_EQ(t.at("layers.1.router.per_expert_scale"), (Shape{128}));
  EXPECT_EQ(t.at("layers.1.experts.gate_up_proj"), (Shape{128, 1408, 2816}));
  EXPECT_EQ(t.at("layers.1.experts.down_proj"), (Shape{128, 2816, 704}));
  EXPECT_EQ(t.at("layers.0.pre_feedforward_layernorm_2.weight"), (Shape{2816}));
  EXPECT_EQ(t.count("embed_tokens_per_layer.weight"), 0u);
  std::map<std::string, TensorSpec> specs;
  for (const TensorSpec& s : expected_tensors(m)) specs[s.name] = s;
  EXPECT_EQ(specs.at("layers.1.experts.down_proj").kind, TensorKind::kExperts);
  EXPECT_EQ(specs.at("layers.1.router.scale").kind, TensorKind::kVector);
  EXPECT_EQ(specs.at("norm.weight").layer, -1);
  EXPECT_EQ(specs.at("layers.1.mlp.up_proj.weight").layer, 1);
}

// Copies the e2b-mini checkpoint into a temp dir, with `edit` applied to the tensor list.
class CheckpointCopy {
 public:
  explicit CheckpointCopy(const std::function<void(std::vector<TensorToWrite>&)>& edit) {
    dir_ = fs::temp_directory_path() / ("infer_tt_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    auto src = TensorStore::open(test::repo_fixtures() / "gemma4-text" / "e2b-mini");
    EXPECT_TRUE(src.ok());
    std::vector<TensorToWrite> t;
    for (const std::string& name : src->names()) {
      const TensorView* v = src->find(name);
      t.push_back({name, v->dtype, v->shape, {v->data, v->nbytes}});
    }
    edit(t);
    auto r = write_safetensors(dir_ / "model.safetensors", t);
    EXPECT_TRUE(r.ok()) << r.error().message;
    auto store = TensorStore::open(dir_);
    EXPECT_TRUE(store.ok());
    result_ = validate_tensors(*load_config(test::repo_fixtures() / "gemma4-text" / "e2b-mini"), *store);
  }
  ~CheckpointCopy() { fs::remove_all(dir_); }
  const Result<void>& result() const { return result_; }

 private:
  fs::path dir_;
  Result<void> result_;
};

TEST(TensorTable, ValidateNamesAWrongShape) {
  std::vector<uint8_t> zeros(64 * 16 * 2);
  CheckpointCopy c([&](std::vector<TensorToWrite>& t) {
    for (TensorToWrite& w : t) {
      if (w.name == "layers.3.self_attn.k_proj.weight") w = {w.name, DType::kBF16, {16, 64}, zeros};
    }
  });
  ASSERT_FALSE(c.result().ok());
  EXPECT_EQ(c.result().error().code, ErrorCode::kShape);
  EXPECT_EQ(c.result().error().message,
            "tensor \"layers.3.self_attn.k_proj.weight\" has shape [16, 64], the config implies [32, 64]");
}

TEST(TensorTable, ValidateNamesAMissingTensor) {
  CheckpointCopy c([](std::vector<TensorToWrite>& t) {
    std::erase_if(t, [](const TensorToWrite& w) { return w.name == "layers.6.layer_scalar"; });
  });
  ASSERT_FALSE(c.result().ok());
  EXPECT_EQ(c.result().error().code, ErrorCode::kNotFound);
  EXPECT_EQ(c.result().error().message, "checkpoint has no tensor \"layers.6.layer_scalar\" (scalar [1])");
}

TEST(TensorTable, ValidateToleratesSharedLayersKvAndALmHead) {
  std::vector<uint8_t> kv(32 * 64 * 2), head(512 * 64 * 2), bad_head(512 * 32 * 2);
  CheckpointCopy ok([&](std::vector<TensorToWrite>& t) {
    t.push_back({"layers.5.self_attn.k_proj.weight", DType::kBF16, {32, 64}, kv});
    t.push_back({"layers.5.self_attn.v_proj.weight", DType::kBF16, {32, 64}, kv});
    t.push_back({"lm_head.weight", DType::kBF16, {512, 64}, head});
  });
  EXPECT_TRUE(ok.result().ok()) << ok.result().error().message;
  CheckpointCopy bad([&](std::vector<TensorToWrite>& t) {
    t.push_back({"lm_head.weight", DType::kBF16, {512, 32}, bad_head});
  });
  ASSERT_FALSE(bad.result().ok());
  EXPECT_NE(bad.result().error().message.find("lm_head.weight"), std::string::npos);
}

}  // namespace
}  // namespace infer
