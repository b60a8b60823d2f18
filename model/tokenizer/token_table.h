// TokenTable: token strings by id in one arena, and an open-addressing index from bytes to id.
// Built once at load (262,144 tokens); lookups take a string_view and allocate nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace infer::tok {

// 64-bit hash of a byte string (8 bytes a step, multiply-xorshift mixing): fast on short tokens.
uint64_t hash_bytes(std::string_view s);

class TokenTable {
 public:
  // Sizes the index for n_tokens entries so inserts never rehash.
  void reserve(size_t n_tokens);
  // Adds `token` as `id`. Returns false (and changes nothing) when the token is already present
  // or the id already names another token: the caller reports which.
  bool insert(std::string_view token, int32_t id);

  int32_t find(std::string_view token) const;  // -1 when absent
  std::optional<int32_t> lookup(std::string_view token) const {
    const int32_t id = find(token);
    return id < 0 ? std::nullopt : std::optional<int32_t>(id);
  }
  bool has_id(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < spans_.size() && spans_[id].present;
  }
  std::string_view token(int32_t id) const;                                 // "" when absent
  int32_t id_limit() const { return static_cast<int32_t>(spans_.size()); }  // max id + 1
  size_t count() const { return count_; }

 private:
  struct Span {
    uint32_t offset = 0;
    uint32_t length = 0;
    bool present = false;
  };
  void grow_index();

  std::string arena_;           // all token bytes, back to back
  std::vector<Span> spans_;     // by id
  std::vector<int32_t> slots_;  // index: id or -1, linear probing, power-of-two size
  size_t count_ = 0;
};

}  // namespace infer::tok
