// The tools a pipeline offers (docs/TOOLS.md, Running calls): the built-in ones when --tools ROOT
// is on, and those a front end declares (client tools, run by the front end and answered through
// Pipeline::tool_result). Shared by the Pipeline (declarations) and the tools actor (who runs a
// call), under a mutex: declarations are rare, lookups one per call.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "actors/tool_loop.h"
#include "base/result.h"
#include "model/tool_format/tool_writer.h"
#include "tools_vfs/builtin_tools.h"

namespace infer::actors {

// PipelineOptions::tools.
struct ToolSetup {
  // The built-in tools over --tools ROOT; null: tools are off (calls reported, not run, and no
  // client tool may be declared).
  std::shared_ptr<const tools::BuiltinTools> builtin;
  int64_t max_steps = kDefaultToolSteps;  // --tool-steps
  // How long a client tool's call waits for Pipeline::tool_result before it gets an error.
  std::chrono::milliseconds client_timeout{60'000};
};

// The built-in tools' specs as the model's declarations.
std::vector<ToolDeclaration> builtin_declarations();

class ToolRegistry {
 public:
  explicit ToolRegistry(bool enabled) : enabled_(enabled) {}

  bool enabled() const { return enabled_; }
  // A client tool: kUnsupported when tools are off, kInvalidArgument for a bad name or schema or
  // a built-in's name. Declaring a client tool's name again replaces it.
  Result<void> declare(ToolDeclaration tool);
  // All the client tools at once (--serve's TOOL_DECLARE): `tools` replace them, [] withdraws
  // them. Each is checked as declare() does and a name may appear once; a refusal changes
  // nothing.
  Result<void> replace_client(std::vector<ToolDeclaration> tools);
  bool is_client(std::string_view name) const;
  // Built-ins first (when on), then client tools in the order declared.
  std::vector<ToolDeclaration> all() const;

 private:
  const bool enabled_;
  mutable std::mutex mu_;
  std::vector<ToolDeclaration> client_;
};

}  // namespace infer::actors
