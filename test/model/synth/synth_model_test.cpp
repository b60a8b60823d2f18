// write_random_checkpoint: determinism across thread counts, names and shapes the loader accepts,
// sharding, dtypes and the distributions of the random weights.
#include "model/synth/synth_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/half.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/tensor_table.h"
#include "model/thread_pool.h"
#include "test/model/synth/temp_dir.h"
#include "test/test_paths.h"

namespace infer {
namespace {

using test::TempDir;

std::filesystem::path fixture_config(const char* name) {
  return test::repo_fixtures() / "gemma4-text" / name / "config.json";
}

void write_or_fail(const std::filesystem::path& config, const std::filesystem::path& out,
                   uint64_t seed, DType dtype, int threads, size_t shard_bytes = 0) {
  ThreadPool pool(threads);
  Result<void> r = write_random_checkpoint(config, out, seed, dtype, pool, shard_bytes);
  ASSERT_TRUE(r.ok()) << r.error().message;
}

void expect_same_files(const std::filesystem::path& a, const std::filesystem::path& b) {
  const auto names = test::file_names(a);
  ASSERT_EQ(names, test::file_names(b));
  for (const std::string& n : names) {
    EXPECT_TRUE(test::read_file(a / n) == test::read_file(b / n)) << n << " differs";
  }
}

std::vector<float> values_of(const TensorView& t) {
  const size_t n = t.nbytes / dtype_size(t.dtype);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (t.dtype == DType::kF32) {
      std::memcpy(&out[i], t.data + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      out[i] = t.dtype == DType::kBF16 ? bf16_to_f32(h) : fp16_to_f32(h);
    }
  }
  return out;
}

TEST(SynthModel, SameSeedGivesIdenticalBytesForAnyThreadCount) {
  TempDir tmp;
  write_or_fail(fixture_config("e2b-mini"), tmp / "one", 7, DType::kBF16, 1);
  write_or_fail(fixture_config("e2b-mini"), tmp / "three", 7, DType::kBF16, 3);
  write_or_fail(fixture_config("e2b-mini"), tmp / "again", 7, DType::kBF16, 2);
  expect_same_files(tmp / "one", tmp / "three");
  expect_same_files(tmp / "one", tmp / "again");
}

TEST(SynthModel, DifferentSeedsGiveDifferentWeights) {
  TempDir tmp;
  write_or_fail(fixture_config("e2b-mini"), tmp / "a", 1, DType::kBF16, 2);
  write_or_fail(fixture_config("e2b-mini"), tmp / "b", 2, DType::kBF16, 2);
  EXPECT_NE(test::read_file(tmp / "a" / "model.safetensors"),
            test::read_file(tmp / "b" / "model.safetensors"));
}

TEST(SynthModel, CheckpointOfEveryFixtureConfigPassesValidation) {
  for (const char* name : {"e2b-mini", "dense-mini", "moe-mini"}) {
    SCOPED_TRACE(name);
    TempDir tmp;
    write_or_fail(fixture_config(name), tmp.path(), 3, DType::kBF16, 2);
    Result<ModelConfig> cfg = load_config(tmp.path());
    ASSERT_TRUE(cfg.ok()) << cfg.error().message;
    Result<TensorStore> store = TensorStore::open(tmp.path());
    ASSERT_TRUE(store.ok()) << store.error().message;
    Result<void> valid = validate_tensors(*cfg, *store);
    EXPECT_TRUE(valid.ok()) << valid.error().message;
    EXPECT_EQ(store->size(), expected_tensors(*cfg).size());
  }
}

TEST(SynthModel, TensorsAreNamedAsSavePretrainedWritesThem) {
  TempDir tmp;
  write_or_fail(fixture_config("e2b-mini"), tmp.path(), 3, DType::kBF16, 1);
  const std::string file = test::read_file(tmp / "model.safetensors");
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(file.data()), file.size());
  Result<SafetensorsHeader> header = parse_safetensors_header(bytes, file.size());
  ASSERT_TRUE(header.ok()) << header.error().message;
  Result<ModelConfig> cfg = load_config(tmp.path());
  ASSERT_TRUE(cfg.ok());
  const std::vector<TensorSpec> specs = expected_tensors(*cfg);
  ASSERT_EQ(header->tensors.size(), specs.size());
  // The data section holds the tensors in table order (the JSON header itself is unordered).
  std::sort(header->tensors.begin(), header->tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.begin < b.begin; });
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(header->tensors[i].name, "model.language_model." + specs[i].name);
    EXPECT_EQ(header->tensors[i].shape, specs[i].shape) << specs[i].name;
    EXPECT_EQ(header->tensors[i].dtype, DType::kBF16);
  }
}

TEST(SynthModel, ConfigIsCopiedUnchangedAndGivesTheSamePlan) {
  TempDir tmp;
  write_or_fail(fixture_config("e2b-mini"), tmp.path(), 3, DType::kBF16, 1);
  EXPECT_EQ(test::read_file(tmp / "config.json"), test::read_file(fixture_config("e2b-mini")));
  Result<ModelConfig> cfg = load_config(tmp.path());
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  ASSERT_EQ(cfg->layers.size(), 7u);
  EXPECT_EQ(cfg->first_kv_shared, 4);
  EXPECT_EQ(cfg->layers[2].type, LayerType::kFull);
  EXPECT_EQ(cfg->layers[2].head_dim, 32);
  EXPECT_TRUE(cfg->layers[6].kv_shared);
  EXPECT_EQ(cfg->layers[6].kv_source, 2);
  EXPECT_EQ(cfg->layers[5].kv_source, 3);
  EXPECT_EQ(cfg->layers[5].mlp_intermediate, 256);
}

TEST(SynthModel, GenerationConfigEndsOnEosAndEndOfTurn) {
  TempDir tmp;
  write_or_fail(fixture_config("e2b-mini"), tmp.path(), 3, DType::kBF16, 1);
  Result<GenerationConfig> gen = load_generation_config(tmp.path());
  ASSERT_TRUE(gen.ok()) << gen.error().message;
  EXPECT_EQ(gen->eos_token_id, (std::vector<int>{1, 106}));
  EXPECT_EQ(gen->top_k, 64);
}

TEST(SynthModel, ShardedWriteReadsBackIdentically) {
  TempDir tmp;
  write_or_fail(fixture_config("e2b-mini"), tmp / "single", 5, DType::kBF16, 2);
  write_or_fail(fixture_config("e2b-mini"), tmp / "sharded", 5, DType::kBF16, 2, 48 << 10);
  EXPECT_TRUE(std::filesystem::exists(tmp / "sharded" / "model.safetensors.index.json"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "sharded" / "model.safetensors"));
  size_t shards = 0;
  for (const std::string& n : test::file_names(tmp / "sharded")) shards += n.starts_with("model-");
  EXPECT_GE(shards, 3u);
  Result<TensorStore> single = TensorStore::open(tmp / "single");
  Result<TensorStore> sharded = TensorStore::open(tmp / "sharded");
  ASSERT_TRUE(single.ok()) << single.error().message;
  ASSERT_TRUE(sharded.ok()) << sharded.error().message;
  ASSERT_EQ(single->names(), sharded->names());
  for (const std::string& name : single->names()) {
    const TensorView* a = single->find(name);
    const TensorView* b = sharded->find(name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_EQ(a->shape, b->shape) << name;
    ASSERT_EQ(a->nbytes, b->nbytes) << name;
    EXPECT_EQ(std::memcmp(a->data, b->data, a->nbytes), 0) << name;
  }
}

TEST(SynthModel, RewritingADirectoryDropsItsOldShards) {
  TempDir tmp;
  write_or_fail(fixture_config("e2b-mini"), tmp.path(), 5, DType::kBF16, 1, 48 << 10);
  write_or_fail(fixture_config("e2b-mini"), tmp.path(), 5, DType::kBF16, 1);
  EXPECT_EQ(
      test::file_names(tmp.path()),
      (std::vector<std::string>{"config.json", "generation_config.json", "model.safetensors"}));
}

TEST(SynthModel, F32AndF16HoldTheSameValuesAsBf16BeforeRounding) {
  TempDir tmp;
  write_or_fail(fixture_config("moe-mini"), tmp / "bf16", 9, DType::kBF16, 2);
  write_or_fail(fixture_config("moe-mini"), tmp / "f16", 9, DType::kF16, 2);
  write_or_fail(fixture_config("moe-mini"), tmp / "f32", 9, DType::kF32, 2);
  Result<TensorStore> bf = TensorStore::open(tmp / "bf16");
  Result<TensorStore> hf = TensorStore::open(tmp / "f16");
  Result<TensorStore> ff = TensorStore::open(tmp / "f32");
  ASSERT_TRUE(bf.ok() && hf.ok() && ff.ok());
  for (const std::string& name : ff->names()) {
    const std::vector<float> f32 = values_of(*ff->find(name));
    const std::vector<float> b16 = values_of(*bf->find(name));
    const std::vector<float> h16 = values_of(*hf->find(name));
    ASSERT_EQ(f32.size(), b16.size()) << name;
    for (size_t i = 0; i < f32.size(); ++i) {
      ASSERT_EQ(bf16_to_f32(f32_to_bf16(f32[i])), b16[i]) << name << "[" << i << "]";
      ASSERT_EQ(fp16_to_f32(f32_to_fp16(f32[i])), h16[i]) << name << "[" << i << "]";
    }
  }
}

// Sample statistics over thousands of elements: a uniform variable's std is within a few % of
// its target, and its range is exactly [center - half_width, center + half_width].
TEST(SynthModel, WeightsFollowTheirDistributions) {
  TempDir tmp;
  write_or_fail(fixture_config("e2b-mini"), tmp.path(), 11, DType::kF32, 2);
  Result<ModelConfig> cfg = load_config(tmp.path());
  Result<TensorStore> store = TensorStore::open(tmp.path());
  ASSERT_TRUE(cfg.ok() && store.ok());
  const double H = cfg->text.hidden_size;
  const double P = cfg->text.hidden_size_per_layer_input;
  auto stats = [&](const char* name, double* mean, double* std, float* lo, float* hi) {
    const std::vector<float> v = values_of(*store->find(name));
    double s = 0, s2 = 0;
    *lo = v[0];
    *hi = v[0];
    for (float x : v) {
      s += x;
      s2 += double(x) * x;
      *lo = std::min(*lo, x);
      *hi = std::max(*hi, x);
    }
    *mean = s / v.size();
    *std = std::sqrt(s2 / v.size() - *mean * *mean);
  };
  double mean, std;
  float lo, hi;
  stats("layers.0.input_layernorm.weight", &mean, &std, &lo, &hi);
  EXPECT_NEAR(mean, 1.0, 0.03);
  EXPECT_GE(lo, 0.9f);
  EXPECT_LE(hi, 1.1f);
  stats("layers.0.layer_scalar", &mean, &std, &lo, &hi);
  EXPECT_NEAR(mean, 1.0, 0.1);
  stats("layers.0.mlp.down_proj.weight", &mean, &std, &lo, &hi);  // [H, I]: in = I
  EXPECT_NEAR(std, 1.0 / std::sqrt(double(cfg->layers[0].mlp_intermediate)), 0.05 * std);
  EXPECT_NEAR(mean, 0.0, 0.1 * std);
  stats("layers.0.self_attn.q_proj.weight", &mean, &std, &lo, &hi);
  EXPECT_NEAR(std, 1.0 / std::sqrt(H), 0.05 * std);
  stats("embed_tokens.weight", &mean, &std, &lo, &hi);
  EXPECT_NEAR(std, 2.0 / std::sqrt(H), 0.05 * std);
  stats("embed_tokens_per_layer.weight", &mean, &std, &lo, &hi);
  EXPECT_NEAR(std, 1.0 / std::sqrt(P), 0.05 * std);
}

TEST(SynthModel, MissingConfigIsAnErrorNotACrash) {
  TempDir tmp;
  ThreadPool pool(1);
  Result<void> r =
      write_random_checkpoint(tmp / "nope.json", tmp / "out", 1, DType::kBF16, pool, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("nope.json"), std::string::npos);
}

// The in-memory store holds exactly what mkmodel writes for the same seed and dtype, and a model
// built from it runs (dense-mini's head is untied, so lm_head.weight is covered too).
TEST(SynthModel, InMemoryStoreEqualsTheWrittenCheckpoint) {
  for (const char* name : {"e2b-mini", "dense-mini", "moe-mini"}) {
    SCOPED_TRACE(name);
    TempDir tmp;
    write_or_fail(fixture_config(name), tmp.path(), 5, DType::kBF16, 2);
    Result<TensorStore> file = TensorStore::open(tmp.path());
    ASSERT_TRUE(file.ok()) << file.error().message;
    ThreadPool pool(3);
    Result<TensorStore> mem =
        random_tensor_store(test::read_file(fixture_config(name)), 5, DType::kBF16, pool);
    ASSERT_TRUE(mem.ok()) << mem.error().message;
    ASSERT_EQ(file->names(), mem->names());
    for (const std::string& n : file->names()) {
      const TensorView* a = file->find(n);
      const TensorView* b = mem->find(n);
      ASSERT_NE(b, nullptr) << n;
      EXPECT_EQ(a->dtype, b->dtype) << n;
      EXPECT_EQ(a->shape, b->shape) << n;
      ASSERT_EQ(a->nbytes, b->nbytes) << n;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data) % 64, 0u) << n;
      EXPECT_EQ(std::memcmp(a->data, b->data, a->nbytes), 0) << n << " differs";
    }
  }
}

TEST(SynthModel, InMemoryStoreRejectsABadConfig) {
  ThreadPool pool(1);
  Result<TensorStore> mem = random_tensor_store("{\"model_type\": 3}", 1, DType::kBF16, pool);
  ASSERT_FALSE(mem.ok());
  EXPECT_FALSE(mem.error().message.empty());
}

}  // namespace
}  // namespace infer
