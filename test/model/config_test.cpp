// config.json parsing and the per-layer plan (GEMMA4_TEXT.md §3): every fixture's plan and RoPE
// tables against its golden.json, the flat (pre-5.15) form, E2B's published shape, and errors.
#include "model/config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "test/test_paths.h"

namespace infer {
namespace {

using nlohmann::json;

const char* kFixtures[] = {"dense-mini", "e2b-long", "e2b-mini", "moe-mini"};

std::filesystem::path fixture_dir(const std::string& name) {
  return test::repo_fixtures() / "gemma4-text" / name;
}

const char* type_str(LayerType t) { return t == LayerType::kFull ? "full_attention" : "sliding_attention"; }

// The plan must equal golden.json's "layer_plan" field for field.
void expect_plan_matches(const ModelConfig& m, const json& plan) {
  ASSERT_EQ(m.layers.size(), plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const LayerPlan& p = m.layers[i];
    EXPECT_EQ(type_str(p.type), plan[i]["type"].get<std::string>());
    EXPECT_EQ(p.head_dim, plan[i]["head_dim"].get<int>());
    EXPECT_EQ(p.num_key_value_heads, plan[i]["num_kv_heads"].get<int>());
    EXPECT_EQ(p.kv_shared, plan[i]["kv_shared"].get<bool>());
    EXPECT_EQ(p.kv_source, plan[i]["kv_source"].get<int>());
    EXPECT_EQ(p.k_eq_v, plan[i]["k_eq_v"].get<bool>());
    EXPECT_EQ(p.mlp_intermediate, plan[i]["mlp_intermediate"].get<int>());
  }
}

// Same plan, field for field.
void expect_same_plan(const ModelConfig& a, const ModelConfig& b) {
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    EXPECT_EQ(a.layers[i].type, b.layers[i].type);
    EXPECT_EQ(a.layers[i].head_dim, b.layers[i].head_dim);
    EXPECT_EQ(a.layers[i].num_key_value_heads, b.layers[i].num_key_value_heads);
    EXPECT_EQ(a.layers[i].kv_shared, b.layers[i].kv_shared);
    EXPECT_EQ(a.layers[i].kv_source, b.layers[i].kv_source);
    EXPECT_EQ(a.layers[i].is_donor, b.layers[i].is_donor);
    EXPECT_EQ(a.layers[i].k_eq_v, b.layers[i].k_eq_v);
    EXPECT_EQ(a.layers[i].mlp_intermediate, b.layers[i].mlp_intermediate);
  }
}

// The published E2B text config in the flat form the hub most likely has (§8).
json e2b_text_config() {
  json types = json::array();
  for (int i = 0; i < 35; ++i) types.push_back(i % 5 == 4 ? "full_attention" : "sliding_attention");
  return {{"model_type", "gemma4_text"}, {"hidden_size", 1536}, {"intermediate_size", 6144},
          {"num_hidden_layers", 35}, {"num_attention_heads", 8}, {"num_key_value_heads", 1},
          {"head_dim", 256}, {"global_head_dim", 512}, {"hidden_size_per_layer_input", 256},
          {"num_kv_shared_layers", 20}, {"use_double_wide_mlp", true}, {"layer_types", types},
          {"final_logit_softcapping", 30.0}, {"eos_token_id", {1, 106}}};
}

Result<ModelConfig> parse(const json& j) { return parse_config(j.dump(), "test config.json"); }

// A small valid text-only config to break one field at a time.
json small_config() {
  return {{"model_type", "gemma4_text"}, {"hidden_size", 64}, {"intermediate_size", 128},
          {"num_hidden_layers", 6}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"head_dim", 16}, {"global_head_dim", 32}, {"hidden_size_per_layer_input", 0}};
}

void expect_error(const json& j, ErrorCode code, const std::string& needle) {
  auto r = parse(j);
  ASSERT_FALSE(r.ok()) << j.dump();
  EXPECT_EQ(r.error().code, code) << r.error().message;
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
}

TEST(Config, EveryFixtureGivesItsGoldenPlanAndRopeTables) {
  for (const char* name : kFixtures) {
    SCOPED_TRACE(name);
    auto m = load_config(fixture_dir(name));
    ASSERT_TRUE(m.ok()) << m.error().message;
    const json golden = json::parse(test::read_file(fixture_dir(name) / "golden.json"));
    expect_plan_matches(*m, golden["layer_plan"]);
    for (LayerType t : {LayerType::kSliding, LayerType::kFull}) {
      SCOPED_TRACE(type_str(t));
      int head_dim = 0;
      for (const LayerPlan& p : m->layers) {
        if (p.type == t) head_dim = p.head_dim;
      }
      const auto want = golden["rope_inv_freq"][type_str(t)].get<std::vector<float>>();
      EXPECT_EQ(rope_inv_freq(m->rope(t), head_dim), want);
    }
  }
}

TEST(Config, E2bVocabFixtureGivesItsPlan) {
  // This fixture's golden.json records no layer_plan: the plan is derived here by §3.2 by hand.
  auto m = load_config(test::shared_fixtures() / "gemma4-text" / "e2b-vocab");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->text.vocab_size, 262144);
  EXPECT_EQ(m->first_kv_shared, 3);
  const json plan = json::parse(R"([
    {"type":"sliding_attention","head_dim":16,"num_kv_heads":2,"kv_shared":false,"kv_source":0,"k_eq_v":false,"mlp_intermediate":64},
    {"type":"sliding_attention","head_dim":16,"num_kv_heads":2,"kv_shared":false,"kv_source":1,"k_eq_v":false,"mlp_intermediate":64},
    {"type":"full_attention","head_dim":32,"num_kv_heads":2,"kv_shared":false,"kv_source":2,"k_eq_v":false,"mlp_intermediate":64},
    {"type":"sliding_attention","head_dim":16,"num_kv_heads":2,"kv_shared":true,"kv_source":1,"k_eq_v":false,"mlp_intermediate":128},
    {"type":"full_attention","head_dim":32,"num_kv_heads":2,"kv_shared":true,"kv_source":2,"k_eq_v":false,"mlp_intermediate":128}])");
  expect_plan_matches(*m, plan);
  EXPECT_TRUE(m->layers[1].is_donor);
  EXPECT_TRUE(m->layers[2].is_donor);
  EXPECT_FALSE(m->layers[0].is_donor);
}

TEST(Config, FixtureFieldsAreRead) {
  auto m = load_config(fixture_dir("moe-mini"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_TRUE(m->is_wrapper);
  EXPECT_EQ(m->text.hidden_size, 64);
  EXPECT_EQ(m->text.vocab_size, 512);
  EXPECT_TRUE(m->text.enable_moe_block);
  EXPECT_EQ(m->text.num_experts, 4);
  EXPECT_EQ(m->text.top_k_experts, 2);
  EXPECT_EQ(m->text.moe_intermediate_size, 32);
  EXPECT_EQ(m->text.sliding_window, 8);
  EXPECT_EQ(m->text.hidden_size_per_layer_input, 0);
  ASSERT_TRUE(m->text.final_logit_softcapping.has_value());
  EXPECT_EQ(*m->text.final_logit_softcapping, 30.0);
  EXPECT_EQ(m->text.eos_token_id, std::vector<int>{1});
  EXPECT_EQ(m->text.rope_full.rope_type, "proportional");
  EXPECT_EQ(m->text.rope_full.partial_rotary_factor, 0.25);
}

TEST(Config, FlatFormGivesTheSamePlanAsPerLayerConfig) {
  for (const char* name : kFixtures) {
    SCOPED_TRACE(name);
    json cfg = json::parse(test::read_file(fixture_dir(name) / "config.json"));
    auto per_layer = parse(cfg);
    ASSERT_TRUE(per_layer.ok()) << per_layer.error().message;
    json& tc = cfg["text_config"];
    for (const auto& [key, v] : tc["per_layer_config"].items()) {
      tc["global_head_dim"] = v["head_dim"];
      if (v.contains("num_key_value_heads")) tc["num_global_key_value_heads"] = v["num_key_value_heads"];
    }
    tc.erase("per_layer_config");
    auto flat = parse(cfg);
    ASSERT_TRUE(flat.ok()) << flat.error().message;
    expect_same_plan(*per_layer, *flat);
  }
}

TEST(Config, SpecExamplesOfPerLayerConfigMatchTheFlatForm) {
  // §3.2: 12 layers, global_head_dim 64, num_global_key_value_heads 1, with and without k_eq_v.
  for (bool k_eq_v : {true, false}) {
    json flat = small_config();
    flat["num_hidden_layers"] = 12;
    flat["attention_k_eq_v"] = k_eq_v;
    flat["global_head_dim"] = 64;
    flat["num_global_key_value_heads"] = 1;
    json plc = flat;
    plc.erase("global_head_dim");
    plc.erase("num_global_key_value_heads");
    json entry = k_eq_v ? json{{"head_dim", 64}, {"num_key_value_heads", 1}} : json{{"head_dim", 64}};
    plc["per_layer_config"] = {{"05", entry}, {"11", entry}};
    auto a = parse(flat);
    auto b = parse(plc);
    ASSERT_TRUE(a.ok()) << a.error().message;
    ASSERT_TRUE(b.ok()) << b.error().message;
    expect_same_plan(*a, *b);
    EXPECT_EQ(a->layers[5].num_key_value_heads, k_eq_v ? 1 : 2);
    EXPECT_EQ(a->layers[11].head_dim, 64);
    EXPECT_EQ(a->layers[11].k_eq_v, k_eq_v);
  }
}

TEST(Config, E2bPublishedShapeHasItsDonorsAndWideMlp) {
  auto m = parse(e2b_text_config());
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_FALSE(m->is_wrapper);
  EXPECT_EQ(m->first_kv_shared, 15);
  for (int i = 0; i < 35; ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const LayerPlan& p = m->layers[size_t(i)];
    const bool full = i % 5 == 4;
    EXPECT_EQ(p.type, full ? LayerType::kFull : LayerType::kSliding);
    EXPECT_EQ(p.head_dim, full ? 512 : 256);
    EXPECT_EQ(p.num_key_value_heads, 1);
    EXPECT_EQ(p.kv_shared, i >= 15);
    EXPECT_EQ(p.kv_source, i >= 15 ? (full ? 14 : 13) : i);
    EXPECT_EQ(p.is_donor, i == 13 || i == 14);
    EXPECT_EQ(p.mlp_intermediate, i >= 15 ? 12288 : 6144);
    EXPECT_FALSE(p.k_eq_v);
  }
  EXPECT_EQ(m->text.eos_token_id, (std::vector<int>{1, 106}));
  EXPECT_EQ(m->text.hidden_size_per_layer_input, 256);
  // Published full layers: 64 rotating pairs with inv_freq 1e6^(-j/256), then zeros (§4.6).
  auto f = rope_inv_freq(m->rope(LayerType::kFull), 512);
  ASSERT_EQ(f.size(), 256u);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[63], float(std::pow(1e6, -63.0 / 256.0)));
  EXPECT_EQ(f[64], 0.0f);
  EXPECT_EQ(f[255], 0.0f);
}

TEST(Config, DefaultLayerTypesAreFiveToOneWithTheLastForcedFull) {
  json j = small_config();
  j["num_hidden_layers"] = 8;
  auto m = parse(j);
  ASSERT_TRUE(m.ok()) << m.error().message;
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(m->layers[size_t(i)].type, i == 5 || i == 7 ? LayerType::kFull : LayerType::kSliding) << i;
  }
  j["layer_types"] = json::array();
  for (int i = 0; i < 8; ++i) j["layer_types"].push_back("sliding_attention");
  m = parse(j);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->layers[7].type, LayerType::kFull);
  EXPECT_EQ(m->layers[7].head_dim, 32);  // global_head_dim applies to the forced layer too
}

TEST(Config, MissingKeysTakeGemma4TextDefaults) {
  auto m = parse({{"model_type", "gemma4_text"}});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->text.hidden_size, 2304);
  EXPECT_EQ(m->text.num_hidden_layers, 30);
  EXPECT_EQ(m->text.hidden_size_per_layer_input, 256);
  EXPECT_FALSE(m->text.final_logit_softcapping.has_value());
  EXPECT_EQ(m->layers[5].head_dim, 512);
  EXPECT_EQ(m->text.rope_sliding.rope_theta, 10000.0);
  EXPECT_EQ(m->text.rope_full.rope_type, "proportional");
  EXPECT_EQ(m->text.rope_full.rope_theta, 1e6);
}

TEST(Config, NullSoftcapMeansNone) {
  json j = small_config();
  j["final_logit_softcapping"] = nullptr;
  auto m = parse(j);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_FALSE(m->text.final_logit_softcapping.has_value());
}

TEST(Config, RejectsOtherModelTypes) {
  json j = small_config();
  j["model_type"] = "gemma3_text";
  expect_error(j, ErrorCode::kUnsupported, "gemma3_text");
  expect_error({{"model_type", "llama"}, {"text_config", small_config()}}, ErrorCode::kUnsupported,
               "llama");
  json wrapped = {{"model_type", "gemma4"}, {"text_config", small_config()}};
  wrapped["text_config"]["model_type"] = "gemma3_text";
  expect_error(wrapped, ErrorCode::kUnsupported, "gemma3_text");
  expect_error({{"model_type", "gemma4"}, {"text_config", nullptr}}, ErrorCode::kParse, "text_config");
}

TEST(Config, RejectsUnsupportedFeatures) {
  json j = small_config();
  j["use_bidirectional_attention"] = "all";
  expect_error(j, ErrorCode::kUnsupported, "use_bidirectional_attention");
  j = small_config();
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "yarn"}, {"factor", 8.0}}}};
  expect_error(j, ErrorCode::kUnsupported, "yarn");
  j = small_config();
  j["hidden_activation"] = "silu";
  expect_error(j, ErrorCode::kUnsupported, "silu");
}

TEST(Config, RejectsNullPleWidth) {
  json j = small_config();
  j["hidden_size_per_layer_input"] = nullptr;
  expect_error(j, ErrorCode::kParse, "hidden_size_per_layer_input");
}

TEST(Config, RejectsBadPerLayerConfig) {
  json j = small_config();
  j["per_layer_config"] = {{"05", {{"head_dim", 32}, {"sliding_window", 4}}}};
  expect_error(j, ErrorCode::kUnsupported, "sliding_window");
  j["per_layer_config"] = {{"06", {{"head_dim", 32}}}};
  expect_error(j, ErrorCode::kParse, "\"06\"");
  j["per_layer_config"] = {{"x5", {{"head_dim", 32}}}};
  expect_error(j, ErrorCode::kParse, "x5");
  j["per_layer_config"] = {{"5", {{"head_dim", "32"}}}};
  expect_error(j, ErrorCode::kParse, "per_layer_config.5.head_dim");
}

TEST(Config, RejectsAMissingKvDonor) {
  json j = small_config();
  j["num_hidden_layers"] = 3;
  j["num_kv_shared_layers"] = 1;
  j["layer_types"] = {"sliding_attention", "sliding_attention", "sliding_attention"};
  expect_error(j, ErrorCode::kParse, "layer 2 (full_attention) is KV-shared");
  j["num_kv_shared_layers"] = 4;
  expect_error(j, ErrorCode::kParse, "num_kv_shared_layers");
}

TEST(Config, RejectsMoeWithoutSizes) {
  json j = small_config();
  j["enable_moe_block"] = true;
  j["num_experts"] = 4;
  expect_error(j, ErrorCode::kParse, "moe_intermediate_size");
  j["top_k_experts"] = 8;
  j["moe_intermediate_size"] = 32;
  expect_error(j, ErrorCode::kParse, "top_k_experts 8 exceeds num_experts 4");
}

TEST(Config, RejectsInconsistentSizes) {
  json j = small_config();
  j["num_key_value_heads"] = 3;
  expect_error(j, ErrorCode::kParse, "not a multiple");
  j = small_config();
  j["head_dim"] = 15;
  expect_error(j, ErrorCode::kParse, "must be even");
  j = small_config();
  j["hidden_size"] = -64;
  expect_error(j, ErrorCode::kParse, "hidden_size is -64, outside [1, 1048576]");
  j = small_config();
  j["hidden_size"] = 0;
  expect_error(j, ErrorCode::kParse, "hidden_size is 0");
  j = small_config();
  j["hidden_size"] = "64";
  expect_error(j, ErrorCode::kParse, "hidden_size must be an integer, got string");
  j = small_config();
  j["num_hidden_layers"] = 18446744073709551615ull;
  expect_error(j, ErrorCode::kParse, "num_hidden_layers");
  j = small_config();
  j["layer_types"] = {"sliding_attention"};
  expect_error(j, ErrorCode::kParse, "layer_types");
  j["layer_types"] = {"sliding_attention", "sliding_attention", "sliding_attention",
                      "sliding_attention", "sliding_attention", "chunked_attention"};
  expect_error(j, ErrorCode::kUnsupported, "chunked_attention");
  j = small_config();
  j["eos_token_id"] = {1, -2};
  expect_error(j, ErrorCode::kParse, "eos_token_id");
}

TEST(Config, RejectsMalformedJson) {
  auto r = parse_config("{\"model_type\": ", "x.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kParse);
  EXPECT_EQ(r.error().message, "x.json: not valid JSON");
  r = parse_config("[1, 2]", "x.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("array"), std::string::npos);
}

TEST(Config, MissingDirectoryIsNotFound) {
  auto r = load_config("/nonexistent/checkpoint");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_NE(r.error().message.find("/nonexistent/checkpoint/config.json"), std::string::npos);
}

TEST(ConfigGeneration, ReadsSamplingDefaults) {
  auto g = parse_generation_config(
      R"({"temperature": 1.0, "top_k": 64, "top_p": 0.95, "do_sample": true, "eos_token_id": [1, 106]})");
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->temperature, 1.0f);
  EXPECT_EQ(g->top_k, 64);
  EXPECT_EQ(g->top_p, 0.95f);
  EXPECT_EQ(g->do_sample, true);
  EXPECT_EQ(g->eos_token_id, (std::vector<int>{1, 106}));
  g = parse_generation_config(R"({"eos_token_id": 1, "top_k": null})");
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->eos_token_id, std::vector<int>{1});
  EXPECT_FALSE(g->top_k.has_value());
  EXPECT_FALSE(g->temperature.has_value());
}

TEST(ConfigGeneration, FixtureFileAndMissingFile) {
  auto g = load_generation_config(fixture_dir("e2b-mini"));
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->eos_token_id, std::vector<int>{1});
  EXPECT_FALSE(g->do_sample.has_value());
  g = load_generation_config("/nonexistent/checkpoint");
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_TRUE(g->eos_token_id.empty());
}

TEST(ConfigGeneration, RejectsWrongTypes) {
  for (const char* text : {R"({"temperature": "hot"})", R"({"top_k": 1.5})", R"({"top_p": 2})",
                           R"({"do_sample": 1})", R"({"eos_token_id": [1, "x"]})", "7"}) {
    auto g = parse_generation_config(text);
    EXPECT_FALSE(g.ok()) << text;
    if (!g.ok()) {
      EXPECT_EQ(g.error().code, ErrorCode::kParse) << text;
    }
  }
}

}  // namespace
}  // namespace infer
