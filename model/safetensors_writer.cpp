// Streaming safetensors writer (header first, then tensor bytes in order, through FILE.tmp and a
// rename), the sharded-checkpoint index, and an all-in-memory convenience for tests.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>
#include <utility>

#include "model/safetensors.h"

namespace infer {

namespace {

Error io_error(const std::filesystem::path& p, const std::string& what) {
  return make_error(ErrorCode::kIo, p.string() + ": " + what);
}

// Writes `text` to `file` through FILE.tmp and a rename.
Result<void> write_whole_file(const std::filesystem::path& file, const std::string& text) {
  const std::filesystem::path tmp = file.string() + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return io_error(tmp, "cannot create");
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    return io_error(tmp, "write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) return io_error(file, "rename from .tmp failed: " + ec.message());
  return Ok{};
}

}  // namespace

uint64_t TensorHeaderEntry::nbytes() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

Result<SafetensorsWriter> SafetensorsWriter::create(const std::filesystem::path& file,
                                                    std::vector<TensorHeaderEntry> tensors) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  std::set<std::string> seen;
  std::vector<uint64_t> ends;
  uint64_t offset = 0;
  for (const TensorHeaderEntry& t : tensors) {
    const std::string at = file.string() + ": tensor \"" + t.name + "\"";
    if (t.name.empty() || t.name == "__metadata__" || !seen.insert(t.name).second) {
      return make_error(ErrorCode::kInvalidArgument, at + ": empty, reserved or repeated name");
    }
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0 || (d > 0 && numel > kMaxTensorElements / uint64_t(d))) {
        return make_error(ErrorCode::kInvalidArgument, at + ": bad shape dimension " + std::to_string(d));
      }
      numel *= uint64_t(d);
    }
    const uint64_t end = offset + t.nbytes();
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, end}}};
    ends.push_back(end);
    offset = end;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // a name that is not valid UTF-8
    return make_error(ErrorCode::kInvalidArgument, file.string() + ": header: " + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-aligned

  SafetensorsWriter w;
  w.file_ = file;
  w.tmp_ = file.string() + ".tmp";
  w.out_ = std::fopen(w.tmp_.c_str(), "wb");
  if (w.out_ == nullptr) return io_error(w.tmp_, "cannot create");
  std::setvbuf(w.out_, nullptr, _IOFBF, 1 << 20);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  if (std::fwrite(len, 1, 8, w.out_) != 8 || std::fwrite(text.data(), 1, text.size(), w.out_) != text.size()) {
    return io_error(w.tmp_, "writing the header failed");
  }
  w.tensors_ = std::move(tensors);
  w.ends_ = std::move(ends);
  while (w.next_ < w.ends_.size() && w.ends_[w.next_] == 0) ++w.next_;  // leading empty tensors
  return w;
}

Result<void> SafetensorsWriter::write_next(std::span<const uint8_t> bytes) {
  if (out_ == nullptr) return io_error(file_, "write_next() after finish() or on a moved-from writer");
  const uint64_t total = ends_.empty() ? 0 : ends_.back();
  if (bytes.size() > total - written_) {
    return make_error(ErrorCode::kInvalidArgument,
                      file_.string() + ": writing " + std::to_string(bytes.size()) + " bytes at " +
                          std::to_string(written_) + " runs past the " + std::to_string(total) +
                          " bytes the header declares");
  }
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), out_) != bytes.size()) {
    return io_error(tmp_, "write failed at data byte " + std::to_string(written_));
  }
  written_ += bytes.size();
  while (next_ < ends_.size() && ends_[next_] <= written_) ++next_;
  return Ok{};
}

Result<void> SafetensorsWriter::finish() {
  if (out_ == nullptr) return io_error(file_, "finish() twice or on a moved-from writer");
  const uint64_t total = ends_.empty() ? 0 : ends_.back();
  if (written_ != total) {
    return make_error(ErrorCode::kInvalidArgument,
                      file_.string() + ": finish() after " + std::to_string(written_) + " of " +
                          std::to_string(total) + " data bytes; tensor \"" + tensors_[next_].name +
                          "\" is incomplete");
  }
  const int rc = std::fclose(std::exchange(out_, nullptr));
  if (rc != 0) return io_error(tmp_, "close failed (disk full?)");
  std::error_code ec;
  std::filesystem::rename(tmp_, file_, ec);
  if (ec) return io_error(file_, "rename from .tmp failed: " + ec.message());
  return Ok{};
}

SafetensorsWriter::SafetensorsWriter(SafetensorsWriter&& o) noexcept
    : file_(std::move(o.file_)),
      tmp_(std::move(o.tmp_)),
      out_(std::exchange(o.out_, nullptr)),
      tensors_(std::move(o.tensors_)),
      ends_(std::move(o.ends_)),
      written_(o.written_),
      next_(o.next_) {}

SafetensorsWriter& SafetensorsWriter::operator=(SafetensorsWriter&& o) noexcept {
  if (this != &o) {
    this->~SafetensorsWriter();
    new (this) SafetensorsWriter(std::move(o));
  }
  return *this;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (out_ != nullptr) {
    std::fclose(out_);
    std::error_code ec;
    std::filesystem::remove(tmp_, ec);
  }
}

Result<void> write_safetensors_index(const std::filesystem::path& dir,
                                     const std::vector<std::pair<std::string, std::string>>& weight_map,
                                     uint64_t total_size) {
  nlohmann::ordered_json j;
  j["metadata"] = {{"total_size", total_size}};
  nlohmann::json map = nlohmann::json::object();  // sorted by name, as transformers writes it
  for (const auto& [name, shard] : weight_map) map[name] = shard;
  j["weight_map"] = std::move(map);
  std::string text;
  try {
    text = j.dump(2) + "\n";
  } catch (const nlohmann::json::exception& e) {  // a name that is not valid UTF-8
    return make_error(ErrorCode::kInvalidArgument, (dir / "model.safetensors.index.json").string() +
                                                       ": " + e.what());
  }
  return write_whole_file(dir / "model.safetensors.index.json", text);
}

Result<void> write_safetensors(const std::filesystem::path& file, std::span<const TensorToWrite> tensors) {
  std::vector<TensorHeaderEntry> entries;
  for (const TensorToWrite& t : tensors) entries.push_back({t.name, t.dtype, t.shape});
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (entries[i].nbytes() != tensors[i].bytes.size()) {
      return make_error(ErrorCode::kInvalidArgument,
                        file.string() + ": tensor \"" + tensors[i].name + "\" has " +
                            std::to_string(tensors[i].bytes.size()) + " bytes, its shape needs " +
                            std::to_string(entries[i].nbytes()));
    }
  }
  INFER_TRY(SafetensorsWriter w, SafetensorsWriter::create(file, std::move(entries)));
  for (const TensorToWrite& t : tensors) INFER_TRY_VOID(w.write_next(t.bytes));
  return w.finish();
}

}  // namespace infer
