// The small golden fixtures (test/fixtures/gemma4-text) loaded for the actor tests, and the bare
// greedy decode loop the pipeline must reproduce token for token.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "model/cpu_forward.h"
#include "model/model.h"
#include "model/sampling.h"
#include "model/thread_pool.h"
#include "test/test_paths.h"

namespace infer::test {

inline constexpr int64_t kMaxPositions = 512;

struct Fixture {
  std::unique_ptr<Model> model;
  std::vector<int32_t> prompt;  // golden.json prompt_ids
  std::vector<int32_t> greedy;  // golden.json greedy_tokens (16)
};

inline Fixture load_fixture(const std::filesystem::path& dir, ThreadPool& pool) {
  Fixture f;
  auto m = Model::load(dir, LoadOptions{}, pool);
  EXPECT_TRUE(m.ok()) << dir << ": " << (m.ok() ? "" : m.error().message);
  if (!m.ok()) return f;
  f.model = std::move(m).value();
  const auto golden = nlohmann::json::parse(read_file(dir / "golden.json"), nullptr, false);
  if (golden.is_object()) {
    f.prompt = golden.value("prompt_ids", std::vector<int32_t>{});
    f.greedy = golden.value("greedy_tokens", std::vector<int32_t>{});
  }
  EXPECT_FALSE(f.prompt.empty()) << dir;
  return f;
}

inline std::filesystem::path fixture_dir(const char* name) {
  return repo_fixtures() / "gemma4-text" / name;
}

// The loop of cli/generate.cpp without actors: prefill, then argmax and decode until n tokens or
// an end id. `feeds` are extra id runs fed (prefilled) before generating, after `prompt`.
inline std::vector<int32_t> bare_greedy(Forward& fwd, std::span<const int32_t> prompt, int64_t n,
                                        std::span<const int32_t> end_ids = {}) {
  std::vector<float> logits(size_t(fwd.vocab_size()));
  std::vector<int32_t> out;
  EXPECT_TRUE(fwd.prefill(prompt, logits.data()).ok());
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = argmax(logits);
    if (std::find(end_ids.begin(), end_ids.end(), id) != end_ids.end()) break;
    out.push_back(id);
    if (i + 1 < n) {
      EXPECT_TRUE(fwd.decode(id, logits.data()).ok());
    }
  }
  return out;
}

}  // namespace infer::test
