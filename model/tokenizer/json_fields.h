// Typed field access on nlohmann::json for the tokenizer.json parsers: a wrong or missing field
// becomes an Error naming where it is, never a thrown exception.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/result.h"

namespace infer::tok {

inline Error field_error(std::string_view where, std::string_view key, std::string_view want) {
  return make_error(ErrorCode::kParse, std::string(where) + ": \"" + std::string(key) +
                                           "\" is missing or not " + std::string(want));
}

inline Result<const nlohmann::json*> json_field(const nlohmann::json& j, std::string_view key,
                                                std::string_view where) {
  if (!j.is_object()) return make_error(ErrorCode::kParse, std::string(where) + ": not an object");
  const auto it = j.find(key);
  if (it == j.end()) return field_error(where, key, "present");
  return &*it;
}

inline Result<std::string> json_string(const nlohmann::json& j, std::string_view key,
                                       std::string_view where) {
  INFER_TRY(const nlohmann::json* v, json_field(j, key, where));
  if (!v->is_string()) return field_error(where, key, "a string");
  return v->get<std::string>();
}

inline Result<bool> json_bool(const nlohmann::json& j, std::string_view key,
                              std::string_view where) {
  INFER_TRY(const nlohmann::json* v, json_field(j, key, where));
  if (!v->is_boolean()) return field_error(where, key, "a boolean");
  return v->get<bool>();
}

// A boolean that may be absent (then `fallback`); present but of another type is an error.
inline Result<bool> json_bool_or(const nlohmann::json& j, std::string_view key, bool fallback,
                                 std::string_view where) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return fallback;
  return json_bool(j, key, where);
}

// Token ids index dense tables, so a wild id in a broken file must not size an allocation.
inline constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

inline Result<int32_t> json_id(const nlohmann::json& v, std::string_view what) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxTokenId) {
    return make_error(ErrorCode::kParse, std::string(what) + " is not a token id (0.." +
                                             std::to_string(kMaxTokenId) + ")");
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

inline Result<const nlohmann::json*> json_array(const nlohmann::json& j, std::string_view key,
                                                std::string_view where) {
  INFER_TRY(const nlohmann::json* v, json_field(j, key, where));
  if (!v->is_array()) return field_error(where, key, "an array");
  return v;
}

// "pattern": {"String": "..."}; the Regex form needs a regex engine we do not carry.
inline Result<std::string> json_string_pattern(const nlohmann::json& j, std::string_view where) {
  INFER_TRY(const nlohmann::json* p, json_field(j, "pattern", where));
  if (p->is_object() && p->contains("String") && p->at("String").is_string()) {
    return p->at("String").get<std::string>();
  }
  if (p->is_object() && p->contains("Regex")) {
    return make_error(ErrorCode::kUnsupported,
                      std::string(where) + ": Regex patterns are not supported");
  }
  return field_error(where, "pattern", "{\"String\": ...}");
}

}  // namespace infer::tok
