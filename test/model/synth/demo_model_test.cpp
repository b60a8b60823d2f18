// The demo model: generated once, identically, atomically; a valid checkpoint; a tokenizer that
// loads and round-trips any text.
#include "model/synth/demo_model.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <thread>

#include "base/half.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/synth/demo_tokenizer.h"
#include "model/tensor_table.h"
#include "model/thread_pool.h"
#include "model/tokenizer/tokenizer.h"
#include "test/model/synth/temp_dir.h"
#include "test/scoped_env.h"
#include "test/test_paths.h"

namespace infer {
namespace {

using test::ScopedEnv;

using test::TempDir;

std::filesystem::path make_demo(const std::filesystem::path& dir, int threads) {
  ThreadPool pool(threads);
  Result<std::filesystem::path> r = ensure_demo_model_at(dir, pool);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? *r : std::filesystem::path();
}

TEST(SynthDemo, GenerationIsIdenticalForAnyThreadCount) {
  TempDir tmp;
  ASSERT_EQ(make_demo(tmp / "a", 1), tmp / "a");
  ASSERT_EQ(make_demo(tmp / "b", 3), tmp / "b");
  const auto names = test::file_names(tmp / "a");
  EXPECT_EQ(names, (std::vector<std::string>{"config.json", "generation_config.json",
                                             "model.safetensors", "tokenizer.json"}));
  ASSERT_EQ(names, test::file_names(tmp / "b"));
  for (const std::string& n : names) {
    EXPECT_TRUE(test::read_file(tmp / "a" / n) == test::read_file(tmp / "b" / n)) << n;
  }
}

TEST(SynthDemo, ASecondCallReusesTheModelWithoutRewritingIt) {
  TempDir tmp;
  make_demo(tmp / "demo", 2);
  const auto before = std::filesystem::last_write_time(tmp / "demo" / "model.safetensors");
  make_demo(tmp / "demo", 2);
  EXPECT_EQ(std::filesystem::last_write_time(tmp / "demo" / "model.safetensors"), before);
}

TEST(SynthDemo, ConcurrentCallsLeaveOneCompleteModelAndNoTemporaries) {
  TempDir tmp;
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) threads.emplace_back([&] { make_demo(tmp / "demo", 1); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(test::file_names(tmp / "demo").size(), 4u);
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "demo");
  }
  EXPECT_EQ(entries, 1u);
}

TEST(SynthDemo, AHalfWrittenDirectoryAndStaleTemporariesAreReplaced) {
  TempDir tmp;
  std::filesystem::create_directories(tmp / "demo");
  { std::ofstream(tmp / "demo" / "config.json") << "{"; }
  const auto stale = tmp / "demo.tmp-1-1";
  std::filesystem::create_directories(stale);
  std::filesystem::last_write_time(
      stale, std::filesystem::file_time_type::clock::now() - std::chrono::hours(2));
  make_demo(tmp / "demo", 2);
  EXPECT_FALSE(std::filesystem::exists(stale));
  Result<ModelConfig> cfg = load_config(tmp / "demo");
  EXPECT_TRUE(cfg.ok()) << cfg.error().message;
}

TEST(SynthDemo, CheckpointPassesValidationWithTheE2BFeatures) {
  TempDir tmp;
  make_demo(tmp / "demo", 2);
  Result<ModelConfig> cfg = load_config(tmp / "demo");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  Result<TensorStore> store = TensorStore::open(tmp / "demo");
  ASSERT_TRUE(store.ok()) << store.error().message;
  Result<void> valid = validate_tensors(*cfg, *store);
  EXPECT_TRUE(valid.ok()) << valid.error().message;
  EXPECT_EQ(cfg->text.hidden_size, 256);
  EXPECT_EQ(cfg->text.hidden_size_per_layer_input, 64);
  EXPECT_EQ(cfg->text.vocab_size, kDemoVocabSize);
  ASSERT_EQ(cfg->layers.size(), 6u);
  EXPECT_EQ(cfg->layers[2].head_dim, 128);
  EXPECT_TRUE(cfg->layers[4].kv_shared);
  EXPECT_EQ(cfg->layers[4].kv_source, 3);
  EXPECT_EQ(cfg->layers[5].kv_source, 2);
  EXPECT_EQ(cfg->layers[5].mlp_intermediate, 2048);
  EXPECT_EQ(cfg->text.eos_token_id, (std::vector<int>{kDemoEosId, kDemoTurnEndId}));
  Result<GenerationConfig> gen = load_generation_config(tmp / "demo");
  ASSERT_TRUE(gen.ok());
  EXPECT_EQ(gen->eos_token_id, (std::vector<int>{kDemoEosId, kDemoTurnEndId}));
}

// Head rows of ids that are not text are scaled by 1/16, so random sampling mostly prints words.
TEST(SynthDemo, HeadRowsOfBytesAndUnusedIdsAreDamped) {
  TempDir tmp;
  make_demo(tmp / "demo", 2);
  Result<TensorStore> store = TensorStore::open(tmp / "demo");
  ASSERT_TRUE(store.ok()) << store.error().message;
  const TensorView* e = store->find("lm_head.weight");
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->dtype, DType::kBF16);
  const int64_t H = e->shape[1];
  auto row_rms = [&](int64_t id) {
    double s = 0;
    for (int64_t j = 0; j < H; ++j) {
      bf16 h;
      std::memcpy(&h, e->data + 2 * (id * H + j), 2);
      s += double(bf16_to_f32(h)) * bf16_to_f32(h);
    }
    return std::sqrt(s / H);
  };
  const DemoTokenizer tok = build_demo_tokenizer(kDemoVocabSize);
  const double text = row_rms(kDemoFirstByteId + 256);  // the first character token
  EXPECT_NEAR(text, 2.0 / std::sqrt(double(H)), 0.15 * text);
  EXPECT_NEAR(row_rms(kDemoFirstByteId + 'a'), text / 16, 0.3 * text / 16);
  EXPECT_NEAR(row_rms(kDemoTurnEndId), text / 16, 0.3 * text / 16);
  ASSERT_LT(tok.first_unused_id, kDemoVocabSize);
  EXPECT_NEAR(row_rms(tok.first_unused_id), text / 16, 0.3 * text / 16);
  EXPECT_NEAR(row_rms(tok.first_unused_id - 1), text, 0.3 * text);
}

TEST(SynthDemo, ModelDirFollowsXdgThenHomeThenTmp) {
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/x/cache");
    EXPECT_EQ(demo_model_dir(), std::filesystem::path("/x/cache/infer/demo-v2"));
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
    ScopedEnv home("HOME", "/home/someone");
    EXPECT_EQ(demo_model_dir(), std::filesystem::path("/home/someone/.cache/infer/demo-v2"));
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
    ScopedEnv home("HOME", nullptr);
    EXPECT_EQ(demo_model_dir(), std::filesystem::path("/tmp/infer-demo-v2"));
  }
}

class SynthDemoTokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Result<Tokenizer> t = Tokenizer::parse(demo_tokenizer_json(kDemoVocabSize));
    ASSERT_TRUE(t.ok()) << t.error().message;
    tok_ = new Tokenizer(std::move(t).value());
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  static Tokenizer* tok_;
};
Tokenizer* SynthDemoTokenizer::tok_ = nullptr;

TEST_F(SynthDemoTokenizer, IsDeterministicAndFillsTheVocabulary) {
  ASSERT_NE(tok_, nullptr);
  EXPECT_EQ(demo_tokenizer_json(kDemoVocabSize), demo_tokenizer_json(kDemoVocabSize));
  EXPECT_EQ(tok_->vocab_size(), kDemoVocabSize);
  EXPECT_EQ(tok_->bos_id(), kDemoBosId);
  EXPECT_EQ(tok_->id_to_token(kDemoTurnStartId), "<|turn>");
  EXPECT_EQ(tok_->id_to_token(kDemoTurnEndId), "<turn|>");
  EXPECT_EQ(tok_->id_to_token(kDemoFirstByteId), "<0x00>");
  EXPECT_EQ(tok_->id_to_token(kDemoFirstByteId + 255), "<0xFF>");
  EXPECT_TRUE(tok_->is_special(kDemoTurnEndId));
}

TEST_F(SynthDemoTokenizer, CommonWordsAreSingleTokens) {
  ASSERT_NE(tok_, nullptr);
  for (const char* word : {" the", " and", " model", " light"}) {
    EXPECT_EQ(tok_->encode(word, false).size(), 1u) << word;
  }
  const std::string text = "The keeper climbed the stairs and the model wrote the next token.";
  EXPECT_LT(tok_->encode(text, false).size(), text.size() / 3);
}

TEST_F(SynthDemoTokenizer, EncodeAddsBosAndMarksTurns) {
  ASSERT_NE(tok_, nullptr);
  const std::vector<int32_t> ids = tok_->encode("<|turn>user\nhi<turn|>", true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids[0], kDemoBosId);
  EXPECT_EQ(ids[1], kDemoTurnStartId);
  EXPECT_EQ(ids.back(), kDemoTurnEndId);
}

TEST_F(SynthDemoTokenizer, RoundTripsAnyTextThroughByteFallback) {
  ASSERT_NE(tok_, nullptr);
  for (const char* text :
       {"Hello, world!", "  two  spaces\tand a tab\n\nnew lines ",
        "naïve café — 日本語 🙂", "Ünïcödé «quotes» ½ ∑ x²", "\x7f~{}|"}) {
    const std::vector<int32_t> ids = tok_->encode(text, false);
    EXPECT_EQ(tok_->decode(ids), text);
  }
  const std::vector<int32_t> ids = tok_->encode("日", false);
  ASSERT_EQ(ids.size(), 3u);  // E6 97 A5 as three byte tokens
  EXPECT_EQ(ids[0], kDemoFirstByteId + 0xE6);
}

}  // namespace
}  // namespace infer
