// The built-in tools the model may call (issue 30 item 7, docs/TOOLS.md "Running calls"): their
// declarations (name, description, JSON schema) and one dispatch, run(name, arguments) -> result,
// over the VFS, the capped reader and the subshell rooted at --tools ROOT. run() never throws: a
// bad argument, a refused path or a failed command is a result {error: "..."} the model reads.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "tools_vfs/capped_reader.h"
#include "tools_vfs/subshell.h"
#include "tools_vfs/vfs.h"

namespace infer::tools {

// One tool as the model is told of it; actors/ turns it into the model's ToolDeclaration.
struct ToolSpec {
  std::string name;
  std::string description;
  nlohmann::json parameters;  // a JSON schema object
};

struct BuiltinOptions {
  VfsLimits vfs;
  ReaderLimits reader;
  SubshellOptions subshell;  // its wall_timeout is run_command's default timeout
  // run_command's timeout argument is clamped to this (seconds).
  double max_command_timeout_s = 300.0;
};

class BuiltinTools {
 public:
  // Opens ROOT for the VFS and the subshell (which says on stderr when Landlock cannot confine
  // its children). count: the engine's token counter, for the reader's token cap.
  static Result<std::unique_ptr<BuiltinTools>> open(const std::string& root, TokenCounter count,
                                                    BuiltinOptions options = {});

  // The declarations of every built-in tool, in a fixed order.
  static const std::vector<ToolSpec>& specs();
  static bool has(std::string_view name);

  // Runs one call. Never throws; arguments must be an object with the declared keys only.
  // Safe to call from several threads.
  nlohmann::json run(std::string_view name, const nlohmann::json& arguments) const noexcept;

 private:
  BuiltinTools(std::unique_ptr<Vfs> vfs, std::unique_ptr<Subshell> shell, TokenCounter count,
               BuiltinOptions options);
  nlohmann::json dispatch(std::string_view name, const nlohmann::json& args) const;
  nlohmann::json read_file(const nlohmann::json& args) const;
  nlohmann::json search_files(const nlohmann::json& args) const;
  nlohmann::json run_command(const nlohmann::json& args) const;

  std::unique_ptr<Vfs> vfs_;  // behind pointers: the reader keeps the Vfs's address
  std::unique_ptr<CappedReader> reader_;
  std::unique_ptr<Subshell> shell_;
  BuiltinOptions options_;
};

// {error: message}: what every tool answers when it cannot do what was asked.
nlohmann::json tool_error(std::string message);

}  // namespace infer::tools
