// The grammar of a tool call's body, `call:NAME{key:value,...}` (GEMMA4_CHAT.md, Tools), read
// from what the call parser collected: the text outside strings and the strings themselves, as
// the <|"|> tokens split them. Strings are whole chunks, so nothing inside one (braces, commas,
// colons, quotes, newlines, marker spellings) is ever read as structure.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <variant>

namespace infer {

// One stretch of a call between <|"|> tokens: the first is structure, then string and structure
// alternate.
struct CallChunk {
  bool string = false;
  std::string text;
};

struct ToolCall {
  std::string name;
  nlohmann::json arguments;  // always an object
};

struct ToolCallError {
  std::string name;      // the tool's name when it could be read, else ""
  std::string what;      // what went wrong, and where ("at byte N of the call")
  std::string raw;       // the call's text (strings between <|"|>), cut to the parser's limit
  size_t raw_bytes = 0;  // the whole call's length, before the cut
};

using ToolCallOutcome = std::variant<ToolCall, ToolCallError>;

// Parses `call:NAME{...}`. Grammar, with ASCII whitespace allowed between any two items:
//   call   := "call" ":" NAME object
//   object := "{" [member ("," member)*] "}"        member := key ":" value
//   array  := "[" [value ("," value)*] "]"          key    := BARE | STRING
//   value  := STRING | NUMBER | true | false | null | object | array
// BARE is a run of bytes that are neither whitespace nor {}[]:, ; NAME is a BARE of
// [A-Za-z0-9_.$-]; NUMBER is a JSON number (an integer that fits int64 or uint64 stays one).
// Strings and keys must be valid UTF-8; a key may appear once per object. Objects and arrays
// nest at most max_depth deep (the arguments object is depth 1). An error fills name and what;
// raw and raw_bytes are the caller's.
ToolCallOutcome parse_call_body(std::span<const CallChunk> chunks, int max_depth);

// The call's text as the model spelled it: the chunks joined by <|"|>.
std::string call_text(std::span<const CallChunk> chunks);

}  // namespace infer
