// Typed, range-checked reads of optional keys from one nlohmann::json object, returning Result
// instead of throwing (STYLE.md, Errors). Used by config.cpp and the safetensors index reader.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace infer {

// Parses `text` as JSON (no exceptions escape); anything but an object is a kParse error.
inline Result<nlohmann::json> parse_json_object(std::string_view text, std::string_view where) {
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return make_error(ErrorCode::kParse, std::string(where) + ": not valid JSON");
  if (!j.is_object()) {
    return make_error(ErrorCode::kParse,
                      std::string(where) + ": top level is a JSON " + j.type_name() + ", not an object");
  }
  return j;
}

// A value for an error message: scalars as JSON, containers by type only (dumping a deeply nested
// value would recurse once per level).
inline std::string json_brief(const nlohmann::json& v) {
  if (v.is_structured()) return std::string("a JSON ") + v.type_name();
  if (v.is_string()) {
    return nlohmann::json(v.get_ref<const std::string&>().substr(0, 64))
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // may cut a UTF-8 char
  }
  return v.dump();
}

// Reads keys of `obj`; a missing key (or null) leaves the output at its default. Messages read
// "<where>: <prefix><key> must be ..." so `prefix` gives the path ("text_config.").
class JsonReader {
 public:
  JsonReader(const nlohmann::json& obj, std::string_view where, std::string prefix)
      : obj_(&obj), where_(where), prefix_(std::move(prefix)) {}

  JsonReader child(const nlohmann::json& obj, const std::string& prefix) const {
    return JsonReader(obj, where_, prefix_ + prefix);
  }
  Error error(ErrorCode code, const std::string& message) const {
    return make_error(code, where_ + ": " + message);
  }
  const nlohmann::json* find(const char* key) const {
    auto it = obj_->find(key);
    return it == obj_->end() ? nullptr : &*it;
  }
  bool has_null(const char* key) const {
    const nlohmann::json* v = find(key);
    return v != nullptr && v->is_null();
  }
  bool has_value(const char* key) const {
    const nlohmann::json* v = find(key);
    return v != nullptr && !v->is_null();
  }

  template <class T>
  Result<void> read_int(const char* key, int64_t lo, int64_t hi, T* out) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr || v->is_null()) return Ok{};
    INFER_TRY(int64_t x, as_int(*v, key, lo, hi));
    *out = T(x);
    return Ok{};
  }
  Result<void> read_double(const char* key, double lo, double hi, double* out) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr || v->is_null()) return Ok{};
    if (!v->is_number()) return bad_type(key, "a number", *v);
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) {
      return error(ErrorCode::kParse, prefix_ + key + " is " + json_brief(*v) + ", outside [" +
                                          nlohmann::json(lo).dump() + ", " +
                                          nlohmann::json(hi).dump() + "]");
    }
    *out = x;
    return Ok{};
  }
  // null is a value here: it resets `out` (final_logit_softcapping: null = no soft-cap).
  Result<void> read_optional_double(const char* key, double lo, double hi,
                                    std::optional<double>* out) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return Ok{};
    if (v->is_null()) {
      out->reset();
      return Ok{};
    }
    double x = 0.0;
    INFER_TRY_VOID(read_double(key, lo, hi, &x));
    *out = x;
    return Ok{};
  }
  Result<void> read_bool(const char* key, bool* out) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr || v->is_null()) return Ok{};
    if (!v->is_boolean()) return bad_type(key, "true or false", *v);
    *out = v->get<bool>();
    return Ok{};
  }
  Result<void> read_string(const char* key, std::string* out) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr || v->is_null()) return Ok{};
    if (!v->is_string()) return bad_type(key, "a string", *v);
    *out = v->get<std::string>();
    return Ok{};
  }
  // An int or a list of ints (eos_token_id), each in [0, INT_MAX].
  Result<void> read_token_ids(const char* key, std::vector<int>* out) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr || v->is_null()) return Ok{};
    constexpr int64_t kMax = 0x7fffffff;
    if (v->is_array()) {
      std::vector<int> ids;
      for (const nlohmann::json& e : *v) {
        INFER_TRY(int64_t id, as_int(e, key, 0, kMax));
        ids.push_back(int(id));
      }
      *out = std::move(ids);
      return Ok{};
    }
    INFER_TRY(int64_t id, as_int(*v, key, 0, kMax));
    *out = {int(id)};
    return Ok{};
  }

 private:
  Result<int64_t> as_int(const nlohmann::json& v, const char* key, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer()) return bad_type(key, "an integer", v);
    const bool too_big = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX);
    const int64_t x = too_big ? INT64_MAX : v.get<int64_t>();
    if (too_big || x < lo || x > hi) {
      return error(ErrorCode::kParse, prefix_ + key + " is " + json_brief(v) + ", outside [" +
                                          std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return x;
  }
  Error bad_type(const char* key, const char* want, const nlohmann::json& v) const {
    return error(ErrorCode::kParse, prefix_ + key + " must be " + want + ", got " + v.type_name());
  }
  const nlohmann::json* obj_;
  std::string where_;
  std::string prefix_;
};

}  // namespace infer
