// A fixture for the tests that run an EpisodicMemory (test/memory, test/actors): the e2b-mini
// fixture's configuration (one tiered layer, 2 KV heads of 32), a fixed clock and a store in a
// fresh directory. Header-only: the actors tests include it too.
#pragma once

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "memory/episodic_memory.h"
#include "model/config.h"
#include "test/memory/temp_dir.h"
#include "test/test_paths.h"

namespace infer::test {

class EpisodicFixture : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    auto cfg = load_config(repo_fixtures() / "gemma4-text" / "e2b-mini");
    ASSERT_TRUE(cfg.ok()) << cfg.error().message;
    config_ = std::move(cfg).value();
    shapes_ = memory::tiered_shapes(config_);
    ASSERT_FALSE(shapes_.empty());
    options_.path = path();
    options_.srvq.iterations = 4;  // training time, not what these tests are about
  }
  const std::vector<memory::TieredShape>& shapes() const { return shapes_; }
  memory::MemoryOptions& options() { return options_; }
  // Opens (or reopens) the store at options().path; a failure is a test failure and null.
  std::unique_ptr<memory::EpisodicMemory> open_memory() {
    auto m = memory::EpisodicMemory::open(config_, options_, {}, [] { return kNowMs; });
    if (!m.ok()) {
      ADD_FAILURE() << m.error().message;
      return nullptr;
    }
    return std::move(m).value();
  }
  static constexpr int64_t kNowMs = 1'700'000'000'000;

 private:
  ModelConfig config_;
  std::vector<memory::TieredShape> shapes_;
  memory::MemoryOptions options_;
};

}  // namespace infer::test
