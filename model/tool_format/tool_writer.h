// Writes Gemma 4's tool blocks (GEMMA4_CHAT.md, Tools): declarations for the system turn, the
// responses the engine injects after a call, and calls (what the model writes; for tests and
// round trips). Values are nlohmann::json: object keys come out sorted (json keeps them in a
// std::map), strings between <|"|> markers, numbers, true, false and null bare.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"
#include "model/tool_format/format_pieces.h"

namespace infer {

// Deepest nesting the writer accepts (a value's outermost object or array is depth 1); the
// call parser's default limit is the same, so whatever is written parses back.
inline constexpr int kMaxToolValueDepth = 64;

struct ToolDeclaration {
  std::string name;  // a bare name: see is_tool_name
  std::string description;
  nlohmann::json parameters;  // a JSON schema object ({type, properties, required}); null: none
};

// [A-Za-z0-9_.$-], 1 to 128 bytes: what `call:NAME{` and `response:NAME{` can carry unquoted.
bool is_tool_name(std::string_view name);
// Whether an object key can be written bare ([A-Za-z0-9_.$-]+); other keys are written as
// <|"|>key<|"|>, which the parser also reads.
bool is_bare_key(std::string_view key);

// A value as the format spells it. kInvalidArgument past kMaxToolValueDepth. NaN and infinities
// are written null (as json::dump does), binary values as arrays of byte values.
Result<void> write_tool_value(const nlohmann::json& value, FormatPieces& out);

// <|tool>declaration:NAME{description:<|"|>...<|"|>,parameters:{...}}<tool|>. The schema is
// written with its keys sorted and every `type` upper-cased (STRING, OBJECT, ...), also inside
// properties, items, anyOf/oneOf/allOf and $defs; other values (enum, default, ...) as they are.
Result<FormatPieces> declaration_pieces(const ToolDeclaration& tool);
// The declarations one after another, with nothing between them: what follows the system text.
Result<FormatPieces> declarations_pieces(std::span<const ToolDeclaration> tools);
// <|turn>system\n{system_text}{declarations}<turn|>\n (the system turn that declares tools; <bos>
// before it is the caller's).
Result<FormatPieces> system_turn_pieces(std::string_view system_text,
                                        std::span<const ToolDeclaration> tools);

// <|tool_call>call:NAME{...}<tool_call|>; the arguments must be an object.
Result<FormatPieces> call_pieces(std::string_view name, const nlohmann::json& arguments);
// <|tool_response>response:NAME{...}<tool_response|>; a result that is not an object is written
// {value:...}.
Result<FormatPieces> response_pieces(std::string_view name, const nlohmann::json& result);

}  // namespace infer
