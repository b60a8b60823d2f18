// The JSON inside tool frames (PROTOCOL.md §4.20-§4.22): nesting bounded before anything
// is parsed, nlohmann's parser run without exceptions (and any it throws caught here), and a
// TOOL_DECLARE's array read into DeclaredTools.
#include "protocol/tool_json.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "protocol/tool_messages.h"

namespace infer::protocol {
namespace {

using nlohmann::json;

Error invalid(std::string what) { return make_error(ErrorCode::kInvalidArgument, std::move(what)); }

}  // namespace

namespace {

// One JSON value, its depth bounded first; nothing thrown escapes.
Result<json> parse_bounded(std::string_view text) {
  if (const size_t depth = json_depth(text); depth > kMaxJsonDepth) {
    return invalid("JSON nested " + std::to_string(depth) + " deep, the limit is " +
                   std::to_string(kMaxJsonDepth));
  }
  try {
    json v = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (v.is_discarded()) return make_error(ErrorCode::kParse, "not valid JSON");
    return v;
  } catch (const std::exception& e) {  // bad_alloc and the like: still an answer, not a crash
    return make_error(ErrorCode::kParse, std::string("JSON not read: ") + e.what());
  }
}

}  // namespace

size_t json_depth(std::string_view text) {
  // Brackets outside strings; a string's escapes (\" and \\) do not end it. Not a validator:
  // the parser comes after and rejects whatever is not JSON.
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

Result<JsonShape> check_json(std::string_view text) {
  INFER_TRY(const json v, parse_bounded(text));
  return v.is_object() ? JsonShape::kObject : v.is_array() ? JsonShape::kArray : JsonShape::kScalar;
}

bool is_wire_tool_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxToolNameBytes) return false;
  for (const char c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '$' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Result<std::vector<DeclaredTool>> parse_tool_declarations(std::string_view text) {
  INFER_TRY(const json all, parse_bounded(text));
  if (!all.is_array()) return invalid("the declarations are not a JSON array");
  try {
    if (all.size() > kMaxDeclaredTools) {
      return invalid(std::to_string(all.size()) + " tools, the limit is " +
                     std::to_string(kMaxDeclaredTools));
    }
    std::vector<DeclaredTool> tools;
    std::set<std::string> names;
    for (size_t i = 0; i < all.size(); ++i) {
      const json& t = all[i];
      const std::string at = "tool " + std::to_string(i);
      if (!t.is_object()) return invalid(at + " is not a JSON object");
      for (const auto& [key, value] : t.items()) {
        if (key != "name" && key != "description" && key != "parameters") {
          return invalid(at + " has the key \"" + key +
                         "\"; only name, description and parameters are read");
        }
      }
      DeclaredTool d;
      const auto name = t.find("name");
      if (name == t.end() || !name->is_string()) return invalid(at + " has no string \"name\"");
      d.name = name->get<std::string>();
      if (!is_wire_tool_name(d.name)) {
        return invalid(at + ": the name \"" + d.name.substr(0, kMaxToolNameBytes) +
                       "\" is not 1-128 of [A-Za-z0-9_.$-]");
      }
      if (!names.insert(d.name).second) return invalid(at + ": \"" + d.name + "\" twice");
      if (const auto desc = t.find("description"); desc != t.end()) {
        if (!desc->is_string()) return invalid(at + ": \"description\" is not a string");
        d.description = desc->get<std::string>();
        if (d.description.size() > kMaxToolDescriptionBytes) {
          return invalid(at + ": the description is " + std::to_string(d.description.size()) +
                         " bytes, the limit is " + std::to_string(kMaxToolDescriptionBytes));
        }
      }
      d.parameters_json = "null";
      if (const auto params = t.find("parameters"); params != t.end() && !params->is_null()) {
        if (!params->is_object()) return invalid(at + ": \"parameters\" is not a JSON object");
        d.parameters_json = params->dump();
      }
      tools.push_back(std::move(d));
    }
    return tools;
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kParse, std::string("declarations not read: ") + e.what());
  }
}

}  // namespace infer::protocol
