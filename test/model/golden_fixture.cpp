// Golden fixture readers: nlohmann::json for golden.json, a minimal safetensors parser for the
// exact logits (F32 and I64 only).
#include "test/model/golden_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "test/test_paths.h"

namespace infer::test {

std::map<std::string, GoldenTensor> read_golden_safetensors(const std::filesystem::path& file) {
  std::map<std::string, GoldenTensor> out;
  const std::string bytes = read_file(file);
  if (bytes.size() < 8) {
    ADD_FAILURE() << file << ": too short";
    return out;
  }
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  const char* data = bytes.data() + 8 + n;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    GoldenTensor t;
    t.shape = info["shape"].get<std::vector<int64_t>>();
    const uint64_t begin = info["data_offsets"][0], end = info["data_offsets"][1];
    const std::string dtype = info["dtype"];
    if (dtype == "F32") {
      t.f32.resize((end - begin) / 4);
      std::memcpy(t.f32.data(), data + begin, end - begin);
    } else if (dtype == "I64") {
      t.i64.resize((end - begin) / 8);
      std::memcpy(t.i64.data(), data + begin, end - begin);
    } else {
      ADD_FAILURE() << file << ": tensor " << name << " has dtype " << dtype;
    }
    out[name] = std::move(t);
  }
  return out;
}

FixtureGolden read_fixture_golden(const std::filesystem::path& dir) {
  FixtureGolden g;
  const nlohmann::json j = nlohmann::json::parse(read_file(dir / "golden.json"));
  auto tensors = read_golden_safetensors(dir / "golden.safetensors");
  g.prompt_ids = j["prompt_ids"].get<std::vector<int32_t>>();
  g.greedy_tokens = j["greedy_tokens"].get<std::vector<int32_t>>();
  g.prompt_logits = tensors["prompt_logits"].f32;
  g.greedy_logits = tensors["greedy_logits"].f32;
  g.vocab = tensors["prompt_logits"].shape.size() == 2 ? tensors["prompt_logits"].shape[1] : 0;
  const nlohmann::json& hc = j["hidden_checksums"];
  g.checksum_position = hc["position"];
  g.embeddings = hc["embeddings"]["values"].get<std::vector<float>>();
  for (const auto& layer : hc["layers"]) g.layer_values.push_back(layer["values"]);
  return g;
}

VocabGolden read_vocab_golden(const std::filesystem::path& dir) {
  VocabGolden g;
  const nlohmann::json j = nlohmann::json::parse(read_file(dir / "golden.json"));
  for (const auto& p : j["prompts"]) {
    VocabPrompt vp;
    vp.text = p["text"];
    vp.ids = p["ids"].get<std::vector<int32_t>>();
    vp.greedy_tokens = p["greedy_tokens"].get<std::vector<int32_t>>();
    vp.greedy_text = p["greedy_text"];
    vp.top5_ids = p["top5_ids"].get<std::vector<std::vector<int32_t>>>();
    vp.top5_logits = p["top5_logits"].get<std::vector<std::vector<float>>>();
    g.prompts.push_back(std::move(vp));
  }
  auto tensors = read_golden_safetensors(dir / "golden.safetensors");
  g.last_prompt_logits = tensors["last_prompt_logits"].f32;
  g.vocab =
      tensors["last_prompt_logits"].shape.size() == 2 ? tensors["last_prompt_logits"].shape[1] : 0;
  return g;
}

int32_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) best = x[i] > x[best] ? i : best;
  return int32_t(best);
}

float max_abs_diff(const float* a, const float* b, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace infer::test
