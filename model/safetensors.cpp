// safetensors reading: a header parser that trusts nothing in the file, and TensorStore, which maps
// model.safetensors or the shards of model.safetensors.index.json and hands out zero-copy views.
#include "model/safetensors.h"

#include <algorithm>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <system_error>

#include "model/json_reader.h"
#include "model/mapped_file.h"

namespace infer {

namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // real headers are < 1 MB; 100 MB is absurd

Error header_error(ErrorCode code, std::string_view where, const std::string& msg) {
  return make_error(code, std::string(where) + ": " + msg);
}

std::string tensor_label(std::string_view name) { return "tensor \"" + std::string(name) + "\""; }

// A shape for messages: "[2,3]" (elements are checked integers by the time this is called,
// except for "too many elements", where later ones may not be; json_brief keeps that flat).
std::string shape_text(const json& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ',';
    s += json_brief(shape[i]);
  }
  return s + "]";
}

Result<DType> parse_dtype(const json& v, std::string_view where, const std::string& name) {
  if (!v.is_string()) return header_error(ErrorCode::kParse, where, tensor_label(name) + ": dtype is not a string");
  const auto& s = v.get_ref<const std::string&>();
  if (s == "BF16") return DType::kBF16;
  if (s == "F16") return DType::kF16;
  if (s == "F32") return DType::kF32;
  return header_error(ErrorCode::kUnsupported, where,
                      tensor_label(name) + " has dtype " + s.substr(0, 32) +
                          "; only BF16, F16 and F32 are supported");
}

Result<uint64_t> parse_u64(const json& v, std::string_view where, const std::string& what) {
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0)) {
    return header_error(ErrorCode::kParse, where, what + " is " + json_brief(v) +
                                                      ", not a non-negative integer");
  }
  return v.get<uint64_t>();
}

Result<TensorEntry> parse_entry(const std::string& name, const json& v, uint64_t data_bytes,
                                std::string_view where) {
  if (!v.is_object()) return header_error(ErrorCode::kParse, where, tensor_label(name) + " is not an object");
  const auto dtype = v.find("dtype");
  const auto shape = v.find("shape");
  const auto offsets = v.find("data_offsets");
  if (dtype == v.end() || shape == v.end() || offsets == v.end()) {
    return header_error(ErrorCode::kParse, where,
                        tensor_label(name) + " needs dtype, shape and data_offsets");
  }
  TensorEntry e;
  e.name = name;
  INFER_TRY(e.dtype, parse_dtype(*dtype, where, name));
  if (!shape->is_array()) return header_error(ErrorCode::kParse, where, tensor_label(name) + ": shape is not a list");
  uint64_t numel = 1;
  for (const json& d : *shape) {
    INFER_TRY(uint64_t dim, parse_u64(d, where, tensor_label(name) + ": shape dimension"));
    if (dim > kMaxTensorElements || (numel != 0 && dim > kMaxTensorElements / numel)) {
      return header_error(ErrorCode::kParse, where, tensor_label(name) + ": shape " +
                                                        shape_text(*shape) + " has too many elements");
    }
    numel *= dim;
    e.shape.push_back(int64_t(dim));
  }
  if (!offsets->is_array() || offsets->size() != 2) {
    return header_error(ErrorCode::kParse, where, tensor_label(name) + ": data_offsets is not [begin, end]");
  }
  INFER_TRY(e.begin, parse_u64((*offsets)[0], where, tensor_label(name) + ": data_offsets begin"));
  INFER_TRY(e.end, parse_u64((*offsets)[1], where, tensor_label(name) + ": data_offsets end"));
  if (e.end < e.begin) {
    return header_error(ErrorCode::kParse, where, tensor_label(name) + " ends at byte " + std::to_string(e.end) +
                                                      " before it begins at " + std::to_string(e.begin));
  }
  if (e.end > data_bytes) {
    return header_error(ErrorCode::kParse, where,
                        tensor_label(name) + " ends at byte " + std::to_string(e.end) +
                            " of the data section, which has " + std::to_string(data_bytes));
  }
  const uint64_t want = numel * dtype_size(e.dtype);
  if (e.end - e.begin != want) {
    return header_error(ErrorCode::kShape, where,
                        tensor_label(name) + " " + dtype_name(e.dtype) + " " + shape_text(*shape) + " needs " +
                            std::to_string(want) + " bytes, data_offsets give " +
                            std::to_string(e.end - e.begin));
  }
  return e;
}

}  // namespace

size_t dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kF32: return "F32";
  }
  return "?";
}

int64_t TensorEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<SafetensorsHeader> parse_safetensors_header(std::span<const uint8_t> head, uint64_t file_size,
                                                   std::string_view where) {
  if (file_size < 8 || head.size() < 8) {
    return header_error(ErrorCode::kParse, where, "file has " + std::to_string(file_size) +
                                                      " bytes, too short for a safetensors header");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | head[size_t(i)];  // little-endian u64
  if (n > kMaxHeaderBytes) {
    return header_error(ErrorCode::kParse, where, "header length " + std::to_string(n) +
                                                      " is absurd (limit " +
                                                      std::to_string(kMaxHeaderBytes) + ")");
  }
  if (8 + n > file_size) {
    return header_error(ErrorCode::kParse, where, "header length " + std::to_string(n) +
                                                      " runs past the end of the " +
                                                      std::to_string(file_size) + "-byte file");
  }
  if (8 + n > head.size()) {
    return header_error(ErrorCode::kInternal, where, "only " + std::to_string(head.size()) +
                                                         " header bytes given, need " + std::to_string(8 + n));
  }
  const char* text = reinterpret_cast<const char*>(head.data()) + 8;
  json j = json::parse(text, text + n, nullptr, false);
  if (j.is_discarded()) return header_error(ErrorCode::kParse, where, "header is not valid JSON");
  if (!j.is_object()) {
    return header_error(ErrorCode::kParse, where,
                        std::string("header is a JSON ") + j.type_name() + ", not an object");
  }
  SafetensorsHeader h;
  h.data_start = 8 + n;
  const uint64_t data_bytes = file_size - h.data_start;
  for (const auto& [name, v] : j.items()) {
    if (name == "__metadata__") continue;
    INFER_TRY(TensorEntry e, parse_entry(name, v, data_bytes, where));
    h.tensors.push_back(std::move(e));
  }
  // Overlap: in begin order, each tensor must start at or after the previous one's end.
  std::vector<const TensorEntry*> order;
  for (const TensorEntry& e : h.tensors) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const TensorEntry* a, const TensorEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i]->begin < order[i - 1]->end) {
      return header_error(ErrorCode::kParse, where,
                          tensor_label(order[i]->name) + " [" + std::to_string(order[i]->begin) + ", " +
                              std::to_string(order[i]->end) + ") overlaps " + tensor_label(order[i - 1]->name) +
                              " [" + std::to_string(order[i - 1]->begin) + ", " +
                              std::to_string(order[i - 1]->end) + ")");
    }
  }
  return h;
}

std::string canonical_tensor_name(std::string_view raw) {
  constexpr std::string_view kText = "model.language_model.";
  constexpr std::string_view kSkip[] = {"model.vision_tower.", "model.audio_tower.",
                                        "model.embed_vision.", "model.embed_audio."};
  if (raw.starts_with(kText)) return std::string(raw.substr(kText.size()));
  for (std::string_view s : kSkip) {
    if (raw.starts_with(s)) return "";
  }
  if (raw.starts_with("model.")) return std::string(raw.substr(6));
  return std::string(raw);
}

TensorStore::TensorStore() = default;
TensorStore::TensorStore(TensorStore&&) noexcept = default;
TensorStore& TensorStore::operator=(TensorStore&&) noexcept = default;
TensorStore::~TensorStore() = default;

const TensorView* TensorStore::find(std::string_view name) const {
  auto it = tensors_.find(std::string(name));
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::string> TensorStore::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, view] : tensors_) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

// Maps `file`, parses its header and adds the tensors `wanted` selects (all when null).
Result<void> TensorStore::add_file(const std::filesystem::path& file, const std::set<std::string>* wanted) {
  INFER_TRY(std::unique_ptr<MappedFile> mf, MappedFile::open(file));
  const std::string where = file.string();
  INFER_TRY(SafetensorsHeader h, parse_safetensors_header(mf->bytes(), mf->size(), where));
  size_t found = 0;
  for (TensorEntry& e : h.tensors) {
    if (wanted != nullptr && wanted->count(e.name) == 0) continue;
    ++found;
    std::string name = canonical_tensor_name(e.name);
    if (name.empty()) continue;
    TensorView v{e.dtype, std::move(e.shape), mf->bytes().data() + h.data_start + e.begin,
                 size_t(e.end - e.begin)};
    if (!tensors_.emplace(name, std::move(v)).second) {
      return make_error(ErrorCode::kParse, where + ": " + tensor_label(e.name) + " is a second copy of \"" +
                                               name + "\"");
    }
  }
  if (wanted != nullptr && found != wanted->size()) {
    for (const std::string& raw : *wanted) {
      bool present = false;
      for (const TensorEntry& e : h.tensors) present = present || e.name == raw;
      if (!present) {
        return make_error(ErrorCode::kNotFound, where + ": " + tensor_label(raw) +
                                                    " is listed for this shard in the index but is not in it");
      }
    }
  }
  files_.push_back(std::move(mf));
  return Ok{};
}

Result<TensorStore> TensorStore::open_file(const std::filesystem::path& file) {
  TensorStore store;
  INFER_TRY_VOID(store.add_file(file, nullptr));
  return store;
}

TensorStore TensorStore::from_memory(std::unique_ptr<MappedFile> block,
                                     std::vector<std::pair<std::string, TensorView>> tensors) {
  TensorStore store;
  for (auto& [name, view] : tensors) store.tensors_.emplace(std::move(name), std::move(view));
  store.files_.push_back(std::move(block));
  return store;
}

Result<TensorStore> TensorStore::open(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return make_error(ErrorCode::kNotFound, dir.string() + ": no such checkpoint directory");
  }
  const std::filesystem::path index = dir / "model.safetensors.index.json";
  const std::filesystem::path single = dir / "model.safetensors";
  if (!std::filesystem::exists(index, ec)) {
    if (!std::filesystem::exists(single, ec)) {
      return make_error(ErrorCode::kNotFound, dir.string() +
                                                  ": no model.safetensors or model.safetensors.index.json");
    }
    return open_file(single);
  }
  INFER_TRY(std::unique_ptr<MappedFile> index_file, MappedFile::open(index));
  const auto bytes = index_file->bytes();
  INFER_TRY(json root, parse_json_object(std::string_view(reinterpret_cast<const char*>(bytes.data()),
                                                          bytes.size()),
                                         index.string()));
  const auto wm = root.find("weight_map");
  if (wm == root.end() || !wm->is_object()) {
    return make_error(ErrorCode::kParse, index.string() + ": no \"weight_map\" object");
  }
  std::map<std::string, std::set<std::string>> by_shard;  // shard file -> its tensors
  for (const auto& [name, shard] : wm->items()) {
    if (!shard.is_string()) {
      return make_error(ErrorCode::kParse, index.string() + ": weight_map[\"" + name +
                                               "\"] is not a file name");
    }
    const auto& file = shard.get_ref<const std::string&>();
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
      return make_error(ErrorCode::kParse, index.string() + ": shard \"" + file +
                                               "\" is not a file name in the checkpoint directory");
    }
    by_shard[file].insert(name);
  }
  TensorStore store;
  for (const auto& [file, names] : by_shard) {
    const std::filesystem::path path = dir / file;
    if (!std::filesystem::exists(path, ec)) {
      return make_error(ErrorCode::kNotFound, index.string() + " lists shard " + file +
                                                  " (for " + tensor_label(*names.begin()) +
                                                  "), which is missing from " + dir.string());
    }
    INFER_TRY_VOID(store.add_file(path, &names));
  }
  return store;
}

}  // namespace infer
