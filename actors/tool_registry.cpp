// The tool registry: built-in declarations from tools_vfs's specs, client tools checked by the
// writer (a declaration that cannot be written is refused here, not when the system turn is).
#include "actors/tool_registry.h"

#include <algorithm>
#include <utility>

namespace infer::actors {

std::vector<ToolDeclaration> builtin_declarations() {
  std::vector<ToolDeclaration> out;
  for (const tools::ToolSpec& s : tools::BuiltinTools::specs()) {
    out.push_back(ToolDeclaration{s.name, s.description, s.parameters});
  }
  return out;
}

namespace {

Result<void> check_client_tool(bool enabled, const ToolDeclaration& tool) {
  if (!enabled) {
    return make_error(ErrorCode::kUnsupported,
                      "tools are off (start with --tools ROOT to declare tools)");
  }
  if (tools::BuiltinTools::has(tool.name)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "'" + tool.name + "' is a built-in tool's name: choose another");
  }
  INFER_TRY_VOID(declaration_pieces(tool));  // the name, the schema's depth
  return Ok{};
}

}  // namespace

Result<void> ToolRegistry::replace_client(std::vector<ToolDeclaration> tools) {
  for (size_t i = 0; i < tools.size(); ++i) {
    INFER_TRY_VOID(check_client_tool(enabled_, tools[i]));
    for (size_t j = 0; j < i; ++j) {
      if (tools[j].name == tools[i].name) {
        return make_error(ErrorCode::kInvalidArgument,
                          "'" + tools[i].name + "' is declared twice");
      }
    }
  }
  std::lock_guard lock(mu_);
  client_ = std::move(tools);
  return Ok{};
}

Result<void> ToolRegistry::declare(ToolDeclaration tool) {
  INFER_TRY_VOID(check_client_tool(enabled_, tool));
  std::lock_guard lock(mu_);
  auto same = std::find_if(client_.begin(), client_.end(),
                           [&](const ToolDeclaration& t) { return t.name == tool.name; });
  if (same != client_.end()) {
    *same = std::move(tool);
  } else {
    client_.push_back(std::move(tool));
  }
  return Ok{};
}

bool ToolRegistry::is_client(std::string_view name) const {
  std::lock_guard lock(mu_);
  return std::any_of(client_.begin(), client_.end(),
                     [&](const ToolDeclaration& t) { return t.name == name; });
}

std::vector<ToolDeclaration> ToolRegistry::all() const {
  std::vector<ToolDeclaration> out;
  if (enabled_) out = builtin_declarations();
  std::lock_guard lock(mu_);
  out.insert(out.end(), client_.begin(), client_.end());
  return out;
}

}  // namespace infer::actors
