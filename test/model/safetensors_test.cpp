// safetensors: writer/reader round trips (single file, streamed in pieces, sharded with an index),
// canonical names, the real fixture checkpoints, and every header corruption the parser rejects.
#include "model/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test/test_paths.h"

namespace infer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("infer_st_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
             std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::vector<uint8_t> ramp(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i * 7 + seed);
  return v;
}

std::span<const uint8_t> view_bytes(const TensorView& v) { return {v.data, v.nbytes}; }

TEST(SafetensorsRoundTrip, WritesAndReadsBf16F16F32) {
  TempDir dir;
  const auto a = ramp(2 * 3 * 2, 1), b = ramp(5 * 2, 2), c = ramp(4 * 4, 3);
  const std::vector<TensorToWrite> tensors = {
      {"model.language_model.layers.0.mlp.up_proj.weight", DType::kBF16, {2, 3}, a},
      {"model.language_model.norm.weight", DType::kF16, {5}, b},
      {"lm_head.weight", DType::kF32, {2, 2}, c}};
  const fs::path file = dir.path() / "model.safetensors";
  ASSERT_TRUE(write_safetensors(file, tensors).ok());
  EXPECT_FALSE(fs::exists(file.string() + ".tmp"));
  auto store = TensorStore::open(dir.path());
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_EQ(store->names(),
            (std::vector<std::string>{"layers.0.mlp.up_proj.weight", "lm_head.weight", "norm.weight"}));
  const TensorView* up = store->find("layers.0.mlp.up_proj.weight");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->dtype, DType::kBF16);
  EXPECT_EQ(up->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(std::ranges::equal(view_bytes(*up), a));
  const TensorView* norm = store->find("norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->dtype, DType::kF16);
  EXPECT_TRUE(std::ranges::equal(view_bytes(*norm), b));
  const TensorView* head = store->find("lm_head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->dtype, DType::kF32);
  EXPECT_TRUE(std::ranges::equal(view_bytes(*head), c));
  EXPECT_EQ(store->find("model.language_model.norm.weight"), nullptr);
}

TEST(SafetensorsWriter, StreamsTensorsInPiecesAcrossBoundaries) {
  TempDir dir;
  const fs::path file = dir.path() / "x.safetensors";
  const std::vector<TensorHeaderEntry> entries = {
      {"empty", DType::kF32, {0}}, {"a", DType::kBF16, {3, 5}}, {"b", DType::kF32, {7}}, {"tail", DType::kF16, {0, 4}}};
  auto w = SafetensorsWriter::create(file, entries);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(w->next_tensor(), 1u);  // the empty tensor needs no bytes
  const auto all = ramp(30 + 28, 9);
  ASSERT_TRUE(w->write_next({all.data(), 7}).ok());
  EXPECT_EQ(w->next_tensor(), 1u);
  ASSERT_TRUE(w->write_next({all.data() + 7, 30}).ok());  // ends a, starts b
  EXPECT_EQ(w->next_tensor(), 2u);
  EXPECT_FALSE(w->finish().ok());  // 21 bytes missing
  ASSERT_TRUE(w->write_next({all.data() + 37, 21}).ok());
  EXPECT_EQ(w->next_tensor(), 4u);
  auto past = w->write_next({all.data(), 1});
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.error().message.find("runs past"), std::string::npos) << past.error().message;
  ASSERT_TRUE(w->finish().ok());
  auto store = TensorStore::open_file(file);
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_TRUE(std::ranges::equal(view_bytes(*store->find("a")), std::span(all.data(), 30)));
  EXPECT_TRUE(std::ranges::equal(view_bytes(*store->find("b")), std::span(all.data() + 30, 28)));
  EXPECT_EQ(store->find("empty")->nbytes, 0u);
  EXPECT_EQ(store->find("tail")->shape, (std::vector<int64_t>{0, 4}));
}

TEST(SafetensorsWriter, AnAbandonedWriterLeavesNoFile) {
  TempDir dir;
  const fs::path file = dir.path() / "x.safetensors";
  {
    auto w = SafetensorsWriter::create(file, {{"a", DType::kF32, {4}}});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->write_next(ramp(8, 0)).ok());
  }
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(fs::exists(file.string() + ".tmp"));
}

TEST(SafetensorsWriter, RejectsRepeatedNamesAndWrongByteCounts) {
  TempDir dir;
  const fs::path file = dir.path() / "x.safetensors";
  EXPECT_FALSE(SafetensorsWriter::create(file, {{"a", DType::kF32, {1}}, {"a", DType::kF32, {1}}}).ok());
  EXPECT_FALSE(SafetensorsWriter::create(file, {{"a", DType::kF32, {-1}}}).ok());
  const auto bytes = ramp(6, 0);
  const std::vector<TensorToWrite> t = {{"a", DType::kF32, {2}, bytes}};
  auto r = write_safetensors(file, t);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("has 6 bytes, its shape needs 8"), std::string::npos) << r.error().message;
}

TEST(SafetensorsSharded, OpensEveryShardThroughTheIndex) {
  TempDir dir;
  const auto a = ramp(8, 1), b = ramp(12, 2), c = ramp(4, 3);
  const std::vector<TensorToWrite> s1 = {{"model.language_model.embed_tokens.weight", DType::kBF16, {2, 2}, a},
                                         {"model.language_model.norm.weight", DType::kF32, {3}, b}};
  const std::vector<TensorToWrite> s2 = {{"model.language_model.layers.0.layer_scalar", DType::kF32, {1}, c},
                                         {"model.vision_tower.x.weight", DType::kBF16, {2}, c}};
  ASSERT_TRUE(write_safetensors(dir.path() / "model-00001-of-00002.safetensors", s1).ok());
  ASSERT_TRUE(write_safetensors(dir.path() / "model-00002-of-00002.safetensors", s2).ok());
  std::vector<std::pair<std::string, std::string>> map = {
      {"model.language_model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
      {"model.language_model.norm.weight", "model-00001-of-00002.safetensors"},
      {"model.language_model.layers.0.layer_scalar", "model-00002-of-00002.safetensors"},
      {"model.vision_tower.x.weight", "model-00002-of-00002.safetensors"}};
  ASSERT_TRUE(write_safetensors_index(dir.path(), map, 28).ok());
  const json index = json::parse(test::read_file(dir.path() / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], 28);
  auto store = TensorStore::open(dir.path());
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_EQ(store->names(),
            (std::vector<std::string>{"embed_tokens.weight", "layers.0.layer_scalar", "norm.weight"}));
  EXPECT_TRUE(std::ranges::equal(view_bytes(*store->find("norm.weight")), b));
  EXPECT_TRUE(std::ranges::equal(view_bytes(*store->find("layers.0.layer_scalar")), c));

  // A tensor the index places in a shard that lacks it.
  map.push_back({"model.language_model.layers.0.input_layernorm.weight", "model-00001-of-00002.safetensors"});
  ASSERT_TRUE(write_safetensors_index(dir.path(), map, 28).ok());
  auto missing = TensorStore::open(dir.path());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("layers.0.input_layernorm.weight"), std::string::npos);

  // A shard file that is not there.
  map.back().second = "model-00003-of-00002.safetensors";
  ASSERT_TRUE(write_safetensors_index(dir.path(), map, 28).ok());
  auto no_shard = TensorStore::open(dir.path());
  ASSERT_FALSE(no_shard.ok());
  EXPECT_EQ(no_shard.error().code, ErrorCode::kNotFound);
  EXPECT_NE(no_shard.error().message.find("model-00003-of-00002.safetensors"), std::string::npos)
      << no_shard.error().message;

  // A shard path outside the directory.
  map.back().second = "../model.safetensors";
  ASSERT_TRUE(write_safetensors_index(dir.path(), map, 28).ok());
  EXPECT_FALSE(TensorStore::open(dir.path()).ok());
}

TEST(TensorStore, MissingDirectoryOrCheckpointIsNotFound) {
  TempDir dir;
  auto r = TensorStore::open(dir.path() / "nope");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  r = TensorStore::open(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_NE(r.error().message.find("no model.safetensors"), std::string::npos) << r.error().message;
}

TEST(TensorStore, RejectsTwoCopiesOfOneCanonicalName) {
  TempDir dir;
  const auto a = ramp(4, 0);
  const std::vector<TensorToWrite> t = {{"model.norm.weight", DType::kF32, {1}, a},
                                        {"model.language_model.norm.weight", DType::kF32, {1}, a}};
  ASSERT_TRUE(write_safetensors(dir.path() / "model.safetensors", t).ok());
  auto r = TensorStore::open(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("second copy of \"norm.weight\""), std::string::npos) << r.error().message;
}

TEST(TensorStore, CanonicalNamesStripPrefixesAndDropOtherTowers) {
  EXPECT_EQ(canonical_tensor_name("model.language_model.layers.3.self_attn.q_proj.weight"),
            "layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(canonical_tensor_name("model.layers.3.self_attn.q_proj.weight"), "layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(canonical_tensor_name("lm_head.weight"), "lm_head.weight");
  EXPECT_EQ(canonical_tensor_name("norm.weight"), "norm.weight");
  for (const char* dropped : {"model.vision_tower.encoder.weight", "model.audio_tower.x",
                              "model.embed_vision.embedding_projection.weight", "model.embed_audio.y"}) {
    EXPECT_EQ(canonical_tensor_name(dropped), "") << dropped;
  }
}

TEST(TensorStore, OpensEveryFixtureCheckpoint) {
  std::vector<fs::path> dirs;
  for (const char* name : {"dense-mini", "e2b-long", "e2b-mini", "moe-mini"}) {
    dirs.push_back(test::repo_fixtures() / "gemma4-text" / name);
  }
  dirs.push_back(test::shared_fixtures() / "gemma4-text" / "e2b-vocab");
  for (const fs::path& d : dirs) {
    SCOPED_TRACE(d.string());
    auto store = TensorStore::open(d);
    ASSERT_TRUE(store.ok()) << store.error().message;
    EXPECT_GT(store->size(), 10u);
    EXPECT_NE(store->find("embed_tokens.weight"), nullptr);
    EXPECT_EQ(store->find("embed_tokens.weight")->dtype, DType::kBF16);
    const json golden = json::parse(test::read_file(d / "golden.json"));
    if (!golden.contains("tensors")) continue;  // e2b-vocab records no tensor list
    EXPECT_EQ(store->size(), golden["tensors"].size());
    for (const auto& [raw, shape] : golden["tensors"].items()) {
      const TensorView* v = store->find(canonical_tensor_name(raw));
      ASSERT_NE(v, nullptr) << raw;
      EXPECT_EQ(v->shape, shape.get<std::vector<int64_t>>()) << raw;
    }
  }
}

}  // namespace
}  // namespace infer
