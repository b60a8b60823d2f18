// Reads the golden fixtures of shared/fixtures/gemma4-text (GEMMA4_TEXT.md §9) for the forward
// tests: golden.json fields and golden.safetensors's exact f32 logits (which hold I64 tensors too,
// so they are parsed here rather than by the engine's TensorStore).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace infer::test {

// The fixtures' acceptance bound for an fp32 engine (the NumPy reference achieves <= 4e-4).
inline constexpr float kGoldenTol = 2e-3f;
inline constexpr int64_t kGoldenMaxPositions = 256;  // e2b-long: 200 prompt + 16 greedy

// The small fixtures copied into test/fixtures/gemma4-text, with their test-name suffixes.
struct FixtureCase {
  const char* dir;
  const char* name;
};
inline constexpr FixtureCase kFixtureCases[] = {
    {"e2b-mini", "E2bMini"}, {"e2b-long", "E2bLong"}, {"dense-mini", "DenseMini"},
    {"moe-mini", "MoeMini"}};
// Each architecture once: e2b-long is e2b-mini's config with a 216-token prompt, for what depends
// on the stream's length (chunking, the ring); what depends on the layers alone skips it.
inline constexpr FixtureCase kArchitectureCases[] = {
    {"e2b-mini", "E2bMini"}, {"dense-mini", "DenseMini"}, {"moe-mini", "MoeMini"}};

// The test-name suffix of a parameter with a `name` (FixtureCase and the like), for
// INSTANTIATE_TEST_SUITE_P(..., ParamName()).
struct ParamName {
  template <class Info>
  std::string operator()(const Info& info) const {
    return info.param.name;
  }
};

// A tensor of golden.safetensors widened to double-free storage: F32 in f32, I64 in i64.
struct GoldenTensor {
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<int64_t> i64;
};

// All tensors of a small safetensors file; fails the calling test (and returns {}) on error.
std::map<std::string, GoldenTensor> read_golden_safetensors(const std::filesystem::path& file);

// The fields of golden.json for the small fixtures (e2b-mini, e2b-long, dense-mini, moe-mini).
struct FixtureGolden {
  std::vector<int32_t> prompt_ids;
  std::vector<float> prompt_logits;    // [T, V], exact f32 from golden.safetensors
  std::vector<int32_t> greedy_tokens;  // 16
  std::vector<float> greedy_logits;    // [16, V]
  int64_t vocab = 0;
  int64_t checksum_position = 0;                 // the position hidden_checksums describe
  std::vector<float> embeddings;                 // [H] at that position
  std::vector<std::vector<float>> layer_values;  // [L][H] at that position
};
FixtureGolden read_fixture_golden(const std::filesystem::path& dir);

// e2b-vocab: text prompts with ids, greedy continuation and its top-5 logits per step.
struct VocabPrompt {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<int32_t> greedy_tokens;
  std::string greedy_text;
  std::vector<std::vector<int32_t>> top5_ids;
  std::vector<std::vector<float>> top5_logits;
};
struct VocabGolden {
  std::vector<VocabPrompt> prompts;
  std::vector<float> last_prompt_logits;  // [prompts, V]
  int64_t vocab = 0;
};
VocabGolden read_vocab_golden(const std::filesystem::path& dir);

// The first index of the largest value (greedy decoding's choice).
int32_t argmax(const float* x, int64_t n);
// max |a[i] - b[i]| over n values.
float max_abs_diff(const float* a, const float* b, int64_t n);

}  // namespace infer::test
