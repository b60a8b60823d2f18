// safetensors checkpoints: header parsing, memory-mapped single-file and sharded stores (zero-copy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/result.h"

namespace infer {

enum class DType { kBF16, kF16, kF32 };

// The most elements a tensor may have (a bound that keeps numel · dtype size far from overflow;
// real checkpoints hold < 2^40 bytes): the reader refuses headers past it, the writer shapes.
inline constexpr uint64_t kMaxTensorElements = 1ull << 50;
size_t dtype_size(DType t);
const char* dtype_name(DType t);

// One tensor of a parsed header: where its bytes are, relative to the data section.
struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // data_offsets, relative to the start of the data section
  uint64_t end = 0;
  int64_t numel() const;
};

struct SafetensorsHeader {
  uint64_t data_start = 0;  // 8 + header length: the file offset of the data section
  std::vector<TensorEntry> tensors;
};

// Parses and validates the header of a safetensors file of `file.size()` bytes (only the header
// bytes need be present in `file` if file_size says how long the whole file is): JSON well-formed,
// known dtypes, shapes non-negative, offsets within the file, sizes = numel * dtype size, no overlap.
// `where` names the file in messages. Skips "__metadata__".
Result<SafetensorsHeader> parse_safetensors_header(std::span<const uint8_t> head, uint64_t file_size,
                                                   std::string_view where = "model.safetensors");

// A read-only view of one tensor inside a mapped file.
struct TensorView {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
};

class MappedFile;

// All tensors of a checkpoint directory: model.safetensors, or the shards listed by
// model.safetensors.index.json. Names are canonical: the "model.language_model." or "model."
// prefix is stripped; vision/audio towers and embedders are dropped; "lm_head.weight" stays.
class TensorStore {
 public:
  static Result<TensorStore> open(const std::filesystem::path& dir);
  // A single safetensors file (tests, mkmodel round-trips).
  static Result<TensorStore> open_file(const std::filesystem::path& file);
  // Tensors already in memory (random-weight models generated in RAM): every view points into
  // `block`, which the store keeps. Names are canonical.
  static TensorStore from_memory(std::unique_ptr<MappedFile> block,
                                 std::vector<std::pair<std::string, TensorView>> tensors);

  const TensorView* find(std::string_view name) const;
  std::vector<std::string> names() const;
  size_t size() const { return tensors_.size(); }

  TensorStore(TensorStore&&) noexcept;
  TensorStore& operator=(TensorStore&&) noexcept;
  ~TensorStore();

 private:
  TensorStore();
  // Maps `file` and adds its tensors: all of them, or only those named in `wanted` (a shard of
  // an index), each of which must be there.
  Result<void> add_file(const std::filesystem::path& file, const std::set<std::string>* wanted);

  std::vector<std::unique_ptr<MappedFile>> files_;
  std::unordered_map<std::string, TensorView> tensors_;
};

// Canonical name of a checkpoint tensor, or "" if a text engine ignores it (§2).
std::string canonical_tensor_name(std::string_view raw);

// What the writer is told up front about each tensor: the header is written first, so a
// 24 GB checkpoint can be streamed tensor by tensor without holding it in memory.
struct TensorHeaderEntry {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;
  uint64_t nbytes() const;  // numel * dtype size
};

// Streams one safetensors file: create() writes the header, write_next() appends the tensors'
// bytes in the order given (a tensor may arrive in several pieces), finish() checks that every
// byte came and closes the file. Writes to FILE.tmp and renames on finish(), so a killed run
// never leaves a truncated FILE behind.
class SafetensorsWriter {
 public:
  static Result<SafetensorsWriter> create(const std::filesystem::path& file,
                                          std::vector<TensorHeaderEntry> tensors);
  // Appends the next bytes; may span the end of one tensor and the start of the next.
  Result<void> write_next(std::span<const uint8_t> bytes);
  // The tensor the next write_next() bytes belong to (its index), or tensors.size() when done.
  size_t next_tensor() const { return next_; }
  Result<void> finish();

  SafetensorsWriter(SafetensorsWriter&&) noexcept;
  SafetensorsWriter& operator=(SafetensorsWriter&&) noexcept;
  ~SafetensorsWriter();  // without finish(): removes FILE.tmp

 private:
  SafetensorsWriter() = default;
  std::filesystem::path file_;
  std::filesystem::path tmp_;
  std::FILE* out_ = nullptr;
  std::vector<TensorHeaderEntry> tensors_;
  std::vector<uint64_t> ends_;  // cumulative end offset of each tensor in the data section
  uint64_t written_ = 0;        // data-section bytes written so far
  size_t next_ = 0;
};

// Writes DIR/model.safetensors.index.json: {"metadata": {"total_size": N}, "weight_map": {name: shard}}.
Result<void> write_safetensors_index(const std::filesystem::path& dir,
                                     const std::vector<std::pair<std::string, std::string>>& weight_map,
                                     uint64_t total_size);

// Convenience for tests and small files: the whole checkpoint in memory, written in one go.
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::span<const uint8_t> bytes;
};
Result<void> write_safetensors(const std::filesystem::path& file, std::span<const TensorToWrite> tensors);

}  // namespace infer
