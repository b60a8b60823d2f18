// JSON checks for the tool frames (PROTOCOL.md §4.20-§4.22), behind a small interface so that
// only tool_json.cpp includes nlohmann/json. Internal to protocol/ (parse_tools.cpp).
#pragma once

#include <cstddef>
#include <string_view>

#include "base/result.h"

namespace infer::protocol {

enum class JsonShape { kObject, kArray, kScalar };

// The deepest bracket nesting of `text` ({ and [ outside strings); 0 for a scalar.
size_t json_depth(std::string_view text);

// Whether `text` (valid UTF-8) is one JSON value: its shape, kParse when it is not JSON,
// kInvalidArgument when it nests deeper than kMaxJsonDepth (checked first, so a deep value is
// never built).
Result<JsonShape> check_json(std::string_view text);

}  // namespace infer::protocol
