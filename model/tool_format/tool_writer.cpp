// The tool-format writers: values, JSON-schema declarations, calls and responses.
#include "model/tool_format/tool_writer.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "model/tool_format/tool_tokens.h"

namespace infer {
namespace {

using json = nlohmann::json;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '$' || c == '-';
}

// A name or key for an error message: printable ASCII kept, the rest as \xNN, long ones cut.
std::string shown(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < 64; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out + (s.size() > 64 ? "\"..." : "\"");
}

Result<void> too_deep() {
  return make_error(
      ErrorCode::kInvalidArgument,
      "tool value nested deeper than " + std::to_string(kMaxToolValueDepth) + " levels");
}

Result<void> check_name(std::string_view name) {
  if (is_tool_name(name)) return Ok{};
  return make_error(ErrorCode::kInvalidArgument,
                    "tool name " + shown(name) + " is not 1 to 128 of [A-Za-z0-9_.$-]");
}

void write_string(std::string_view s, FormatPieces& out) {
  out.marker(kToolString);
  out.text(s);
  out.marker(kToolString);
}

void write_key(std::string_view key, FormatPieces& out) {
  if (is_bare_key(key)) {
    out.text(key);
  } else {
    write_string(key, out);
  }
}

// `depth`: the containers around `v`.
Result<void> write_value(const json& v, int depth, FormatPieces& out) {
  switch (v.type()) {
    case json::value_t::object: {
      if (depth + 1 > kMaxToolValueDepth) return too_deep();
      out.text("{");
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (it != v.begin()) out.text(",");
        write_key(it.key(), out);
        out.text(":");
        INFER_TRY_VOID(write_value(it.value(), depth + 1, out));
      }
      out.text("}");
      return Ok{};
    }
    case json::value_t::array: {
      if (depth + 1 > kMaxToolValueDepth) return too_deep();
      out.text("[");
      for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0) out.text(",");
        INFER_TRY_VOID(write_value(v[i], depth + 1, out));
      }
      out.text("]");
      return Ok{};
    }
    case json::value_t::binary: {
      if (depth + 1 > kMaxToolValueDepth) return too_deep();
      out.text("[");
      const json::binary_t& bytes = v.get_binary();
      for (size_t i = 0; i < bytes.size(); ++i) {
        if (i > 0) out.text(",");
        out.text(std::to_string(bytes[i]));
      }
      out.text("]");
      return Ok{};
    }
    case json::value_t::string:
      write_string(v.get_ref<const std::string&>(), out);
      return Ok{};
    case json::value_t::boolean:
      out.text(v.get<bool>() ? "true" : "false");
      return Ok{};
    case json::value_t::number_integer:
      out.text(std::to_string(v.get<int64_t>()));
      return Ok{};
    case json::value_t::number_unsigned:
      out.text(std::to_string(v.get<uint64_t>()));
      return Ok{};
    case json::value_t::number_float:
      // dump() writes the shortest text that reads back to the same double ("0.1", "1.0",
      // "1e+300"); non-finite values have no spelling and become null, as dump() makes them.
      out.text(std::isfinite(v.get<double>()) ? v.dump() : "null");
      return Ok{};
    case json::value_t::null:
    case json::value_t::discarded:
      out.text("null");
      return Ok{};
  }
  out.text("null");
  return Ok{};
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

bool is_one_of(std::string_view key, std::initializer_list<std::string_view> keys) {
  for (std::string_view k : keys) {
    if (key == k) return true;
  }
  return false;
}

Result<void> write_schema(const json& schema, int depth, FormatPieces& out);

// {name: schema, ...} (properties, $defs) or [schema, ...] (anyOf, prefixItems).
Result<void> write_schemas(const json& v, int depth, FormatPieces& out) {
  if (!v.is_object() && !v.is_array()) return write_value(v, depth, out);
  if (depth + 1 > kMaxToolValueDepth) return too_deep();
  out.text(v.is_object() ? "{" : "[");
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it != v.begin()) out.text(",");
    if (v.is_object()) {
      write_key(it.key(), out);
      out.text(":");
    }
    INFER_TRY_VOID(write_schema(it.value(), depth + 1, out));
  }
  out.text(v.is_object() ? "}" : "]");
  return Ok{};
}

Result<void> write_type(const json& type, int depth, FormatPieces& out) {
  if (type.is_string()) {
    write_string(upper(type.get_ref<const std::string&>()), out);
    return Ok{};
  }
  if (!type.is_array()) return write_value(type, depth, out);
  json upper_types = json::array();
  for (const json& t : type) {
    upper_types.push_back(t.is_string() ? json(upper(t.get_ref<const std::string&>())) : t);
  }
  return write_value(upper_types, depth, out);
}

// A JSON schema: the keywords that hold schemas are walked as schemas, `type` is upper-cased,
// everything else (description, enum, default, required, ...) is a plain value.
Result<void> write_schema(const json& schema, int depth, FormatPieces& out) {
  if (!schema.is_object()) return write_value(schema, depth, out);
  if (depth + 1 > kMaxToolValueDepth) return too_deep();
  out.text("{");
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    if (it != schema.begin()) out.text(",");
    const std::string& key = it.key();
    write_key(key, out);
    out.text(":");
    if (key == "type") {
      INFER_TRY_VOID(write_type(it.value(), depth + 1, out));
    } else if (is_one_of(key, {"properties", "patternProperties", "$defs", "definitions",
                               "dependentSchemas", "anyOf", "oneOf", "allOf", "prefixItems"})) {
      INFER_TRY_VOID(write_schemas(it.value(), depth + 1, out));
    } else if (key == "items" && it.value().is_array()) {  // draft 4-7 tuple form
      INFER_TRY_VOID(write_schemas(it.value(), depth + 1, out));
    } else if (is_one_of(key, {"items", "additionalProperties", "additionalItems", "not",
                               "contains", "if", "then", "else", "propertyNames",
                               "unevaluatedItems", "unevaluatedProperties"})) {
      INFER_TRY_VOID(write_schema(it.value(), depth + 1, out));
    } else {
      INFER_TRY_VOID(write_value(it.value(), depth + 1, out));
    }
  }
  out.text("}");
  return Ok{};
}

}  // namespace

bool is_tool_name(std::string_view name) {
  return !name.empty() && name.size() <= 128 && is_bare_key(name);
}

bool is_bare_key(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    if (!is_name_char(c)) return false;
  }
  return true;
}

Result<void> write_tool_value(const json& value, FormatPieces& out) {
  return write_value(value, 0, out);
}

Result<FormatPieces> declaration_pieces(const ToolDeclaration& tool) {
  INFER_TRY_VOID(check_name(tool.name));
  if (!tool.parameters.is_null() && !tool.parameters.is_object()) {
    return make_error(ErrorCode::kInvalidArgument,
                      "tool " + tool.name + ": parameters must be a JSON schema object, not " +
                          std::string(tool.parameters.type_name()));
  }
  FormatPieces out;
  out.marker(kToolOpen);
  out.text("declaration:");
  out.text(tool.name);
  out.text("{description:");
  write_string(tool.description, out);
  if (!tool.parameters.is_null()) {
    out.text(",parameters:");
    // The declaration's own braces are depth 1.
    INFER_TRY_VOID(write_schema(tool.parameters, 1, out));
  }
  out.text("}");
  out.marker(kToolClose);
  return out;
}

Result<FormatPieces> declarations_pieces(std::span<const ToolDeclaration> tools) {
  FormatPieces out;
  for (const ToolDeclaration& tool : tools) {
    INFER_TRY(FormatPieces one, declaration_pieces(tool));
    out.append(one);
  }
  return out;
}

Result<FormatPieces> system_turn_pieces(std::string_view system_text,
                                        std::span<const ToolDeclaration> tools) {
  INFER_TRY(FormatPieces declarations, declarations_pieces(tools));
  FormatPieces out;
  out.marker(kTurnOpen);
  out.text("system\n");
  out.text(system_text);
  out.append(declarations);
  out.marker(kTurnClose);
  out.text("\n");
  return out;
}

Result<FormatPieces> call_pieces(std::string_view name, const json& arguments) {
  INFER_TRY_VOID(check_name(name));
  if (!arguments.is_object()) {
    return make_error(ErrorCode::kInvalidArgument, "tool call arguments must be an object, not " +
                                                       std::string(arguments.type_name()));
  }
  FormatPieces out;
  out.marker(kToolCallOpen);
  out.text("call:");
  out.text(name);
  INFER_TRY_VOID(write_value(arguments, 0, out));
  out.marker(kToolCallClose);
  return out;
}

Result<FormatPieces> response_pieces(std::string_view name, const json& result) {
  INFER_TRY_VOID(check_name(name));
  FormatPieces out;
  out.marker(kToolResponseOpen);
  out.text("response:");
  out.text(name);
  if (result.is_object()) {
    INFER_TRY_VOID(write_value(result, 0, out));
  } else {
    out.text("{value:");
    INFER_TRY_VOID(write_value(result, 1, out));
    out.text("}");
  }
  out.marker(kToolResponseClose);
  return out;
}

}  // namespace infer
