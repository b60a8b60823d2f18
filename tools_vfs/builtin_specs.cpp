// The built-in tools' declarations: what the model is told each tool does and takes. The
// descriptions say the limits the model meets (chunks, offsets, timeouts) so it can plan.
#include <string_view>

#include "tools_vfs/builtin_tools.h"

namespace infer::tools {
namespace {

using json = nlohmann::json;

json prop(std::string_view type, std::string_view description) {
  return json{{"type", type}, {"description", description}};
}

json object(json properties, std::vector<std::string> required) {
  json o{{"type", "object"}, {"properties", std::move(properties)}};
  if (!required.empty()) o["required"] = std::move(required);
  return o;
}

const json kPath = prop("string", "a path relative to the working directory's root");

std::vector<ToolSpec> make_specs() {
  std::vector<ToolSpec> s;
  s.push_back({"list_dir", "Lists a directory: names, types and sizes, sorted by name.",
               object({{"path", prop("string", "the directory; \"\" or \".\" is the root")}},
                      {})});
  s.push_back({"stat", "Type, size, modification time and mode of a file or directory.",
               object({{"path", kPath}}, {"path"})});
  s.push_back({"read_file",
               "Reads a text file in chunks. Each chunk says how many bytes are left and the "
               "offset to continue from; binary files are described, not shown.",
               object({{"path", kPath},
                       {"offset", prop("integer", "the byte to start from (0: the start)")}},
                      {"path"})});
  s.push_back({"write_file", "Creates or replaces a file with the given text.",
               object({{"path", kPath}, {"content", prop("string", "the file's new content")}},
                      {"path", "content"})});
  s.push_back({"make_dir", "Creates one directory (its parent must exist).",
               object({{"path", kPath}}, {"path"})});
  s.push_back({"remove", "Removes a file, a link or an empty directory.",
               object({{"path", kPath}}, {"path"})});
  s.push_back({"search_files",
               "Searches a directory tree: by name (entries whose name holds the text) or by "
               "content (lines holding the text). Give name or content, not both.",
               object({{"dir", prop("string", "where to search; \"\" is the root")},
                       {"name", prop("string", "text the entry's name holds")},
                       {"content", prop("string", "text a line holds")}},
                      {})});
  s.push_back({"run_command",
               "Runs a command in the root (or cwd beneath it) without a shell: argv is the "
               "program and its arguments. For a shell script give shell (sh or bash) and "
               "script instead. Output is cut to its head and tail; the command is ended at "
               "the timeout.",
               object({{"argv", json{{"type", "array"},
                                     {"items", {{"type", "string"}}},
                                     {"description", "the program and its arguments"}}},
                       {"shell", prop("string", "sh or bash, to run script")},
                       {"script", prop("string", "the shell script (with shell)")},
                       {"cwd", prop("string", "the working directory, relative to the root")},
                       {"timeout_s", prop("number", "seconds before it is ended")}},
                      {})});
  return s;
}

}  // namespace

const std::vector<ToolSpec>& BuiltinTools::specs() {
  static const std::vector<ToolSpec> kSpecs = make_specs();
  return kSpecs;
}

bool BuiltinTools::has(std::string_view name) {
  for (const ToolSpec& s : specs()) {
    if (s.name == name) return true;
  }
  return false;
}

}  // namespace infer::tools
