// The built-in tools' dispatch: arguments checked against the declaration (an object, known keys,
// the right types), then one VFS, reader or subshell call; every failure becomes {error: ...}.
#include "tools_vfs/builtin_tools.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <utility>

namespace infer::tools {
namespace {

using json = nlohmann::json;

const ToolSpec* find_spec(std::string_view name) {
  for (const ToolSpec& s : BuiltinTools::specs()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string key_list(const json& properties) {
  std::string out;
  for (const auto& [key, value] : properties.items()) out += (out.empty() ? "" : ", ") + key;
  return out.empty() ? "no arguments" : out;
}

// The arguments against the declaration: an object, no unknown key, every required key.
Result<void> check_arguments(const ToolSpec& spec, const json& args) {
  if (!args.is_object()) {
    return make_error(ErrorCode::kInvalidArgument, spec.name + ": the arguments must be an object");
  }
  const json& props = spec.parameters.at("properties");
  for (const auto& [key, value] : args.items()) {
    if (!props.contains(key)) {
      return make_error(ErrorCode::kInvalidArgument, spec.name + ": unknown argument '" + key +
                                                         "' (it takes " + key_list(props) + ")");
    }
  }
  if (spec.parameters.contains("required")) {
    for (const json& key : spec.parameters.at("required")) {
      if (!args.contains(key.get<std::string>())) {
        return make_error(ErrorCode::kInvalidArgument,
                          spec.name + ": the argument '" + key.get<std::string>() + "' is missing");
      }
    }
  }
  return Ok{};
}

Result<std::string> string_arg(const json& args, const char* key, std::string fallback = "") {
  if (!args.contains(key)) return fallback;
  const json& v = args.at(key);
  if (!v.is_string()) {
    return make_error(ErrorCode::kInvalidArgument,
                      std::string("'") + key + "' must be a string, got " + v.type_name());
  }
  return v.get<std::string>();
}

Result<uint64_t> offset_arg(const json& args, const char* key) {
  if (!args.contains(key)) return uint64_t(0);
  const json& v = args.at(key);
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
  return make_error(ErrorCode::kInvalidArgument,
                    std::string("'") + key + "' must be an integer 0 or more, got " + v.dump());
}

json error_of(const Error& e) { return tool_error(e.message); }

json entry_json(const EntryInfo& e) {
  json j{{"name", e.name}, {"type", entry_type_name(e.type)}, {"size", e.size_bytes}};
  if (e.type == EntryType::kSymlink) j["link"] = e.link_target;
  return j;
}

json search_json(const SearchResult& r) {
  json hits = json::array();
  for (const SearchHit& h : r.hits) {
    json hit{{"path", h.path}};
    if (h.line > 0) {
      hit["line"] = h.line;
      hit["text"] = h.text;
    }
    hits.push_back(std::move(hit));
  }
  return json{{"hits", std::move(hits)}, {"truncated", r.truncated}};
}

}  // namespace

json tool_error(std::string message) { return json{{"error", std::move(message)}}; }

BuiltinTools::BuiltinTools(std::unique_ptr<Vfs> vfs, std::unique_ptr<Subshell> shell,
                           TokenCounter count, BuiltinOptions options)
    : vfs_(std::move(vfs)), shell_(std::move(shell)), options_(std::move(options)) {
  // Checked in open() before the constructor runs.
  reader_ = std::make_unique<CappedReader>(
      CappedReader::create(*vfs_, std::move(count), options_.reader).value());
}

Result<std::unique_ptr<BuiltinTools>> BuiltinTools::open(const std::string& root,
                                                         TokenCounter count,
                                                         BuiltinOptions options) {
  INFER_TRY(Vfs vfs, Vfs::open(root, ResolverKind::kAuto, options.vfs));
  auto held = std::make_unique<Vfs>(std::move(vfs));
  INFER_TRY_VOID(CappedReader::create(*held, count, options.reader));  // the limits, checked
  INFER_TRY(Subshell shell, Subshell::open(root, options.subshell));
  return std::unique_ptr<BuiltinTools>(
      new BuiltinTools(std::move(held), std::make_unique<Subshell>(std::move(shell)),
                       std::move(count), std::move(options)));
}

json BuiltinTools::run(std::string_view name, const json& arguments) const noexcept {
  try {
    const ToolSpec* spec = find_spec(name);
    if (spec == nullptr) return tool_error("no tool named '" + std::string(name) + "'");
    if (Result<void> ok = check_arguments(*spec, arguments); !ok) return error_of(ok.error());
    return dispatch(name, arguments);
  } catch (const std::exception& e) {  // json's accessors, allocation
    return tool_error(std::string(name) + ": " + e.what());
  }
}

json BuiltinTools::dispatch(std::string_view name, const json& args) const {
  if (name == "read_file") return read_file(args);
  if (name == "search_files") return search_files(args);
  if (name == "run_command") return run_command(args);
  const Result<std::string> path = string_arg(args, "path");
  if (!path) return error_of(path.error());
  if (name == "list_dir") {
    const Result<Listing> l = vfs_->list(*path);
    if (!l) return error_of(l.error());
    json entries = json::array();
    for (const EntryInfo& e : l->entries) entries.push_back(entry_json(e));
    return json{{"path", *path},
                {"entries", std::move(entries)},
                {"total", l->total_entries},
                {"truncated", l->total_entries > l->entries.size()}};
  }
  if (name == "stat") {
    const Result<EntryInfo> e = vfs_->stat(*path);
    if (!e) return error_of(e.error());
    return json{{"path", *path},
                {"type", entry_type_name(e->type)},
                {"size", e->size_bytes},
                {"mtime", e->mtime_s},
                {"mode", e->mode}};
  }
  if (name == "write_file") {
    const Result<std::string> content = string_arg(args, "content");
    if (!content) return error_of(content.error());
    if (Result<void> w = vfs_->write(*path, *content); !w) return error_of(w.error());
    return json{{"path", *path}, {"bytes_written", content->size()}};
  }
  if (name == "make_dir") {
    if (Result<void> m = vfs_->mkdir(*path); !m) return error_of(m.error());
    return json{{"path", *path}, {"created", true}};
  }
  if (name == "remove") {
    if (Result<void> r = vfs_->remove(*path); !r) return error_of(r.error());
    return json{{"path", *path}, {"removed", true}};
  }
  return tool_error("no tool named '" + std::string(name) + "'");
}

json BuiltinTools::read_file(const json& args) const {
  const Result<std::string> path = string_arg(args, "path");
  if (!path) return error_of(path.error());
  const Result<uint64_t> offset = offset_arg(args, "offset");
  if (!offset) return error_of(offset.error());
  const Result<FileChunk> c = reader_->read(*path, *offset);
  if (!c) return error_of(c.error());
  json out{{"path", *path}, {"text", render_chunk(*c)}, {"file_size", c->file_size_bytes}};
  if (c->binary) {
    out["binary"] = true;
    return out;
  }
  out["offset"] = c->offset;
  out["next_offset"] = c->next_offset;
  out["bytes_left"] = c->bytes_left;
  out["eof"] = c->eof;
  return out;
}

json BuiltinTools::search_files(const json& args) const {
  const Result<std::string> dir = string_arg(args, "dir");
  if (!dir) return error_of(dir.error());
  const bool by_name = args.contains("name"), by_content = args.contains("content");
  if (by_name == by_content) {
    return tool_error("search_files: give either name or content (exactly one)");
  }
  const Result<std::string> needle = string_arg(args, by_name ? "name" : "content");
  if (!needle) return error_of(needle.error());
  if (needle->empty()) return tool_error("search_files: the text to search for is empty");
  const Result<SearchResult> r =
      by_name ? vfs_->search_names(*dir, *needle) : vfs_->search_content(*dir, *needle);
  if (!r) return error_of(r.error());
  return search_json(*r);
}

json BuiltinTools::run_command(const json& args) const {
  SubshellRequest req;
  const bool has_argv = args.contains("argv"), has_shell = args.contains("shell");
  if (has_argv == has_shell) {
    return tool_error("run_command: give either argv, or shell and script (exactly one way)");
  }
  if (has_argv) {
    const json& argv = args.at("argv");
    if (!argv.is_array() || argv.empty()) {
      return tool_error("run_command: argv must be a non-empty array of strings");
    }
    for (const json& a : argv) {
      if (!a.is_string()) {
        return tool_error("run_command: argv holds " + a.dump() + ", not a string");
      }
      req.argv.push_back(a.get<std::string>());
    }
    if (args.contains("script")) return tool_error("run_command: script goes with shell, not argv");
  } else {
    const Result<std::string> shell = string_arg(args, "shell");
    if (!shell) return error_of(shell.error());
    if (*shell != "sh" && *shell != "bash") {
      return tool_error("run_command: shell must be sh or bash, got '" + *shell + "'");
    }
    if (!args.contains("script")) return tool_error("run_command: shell needs a script");
    const Result<std::string> script = string_arg(args, "script");
    if (!script) return error_of(script.error());
    req.argv = {*shell, "-c", *script};
  }
  const Result<std::string> cwd = string_arg(args, "cwd");
  if (!cwd) return error_of(cwd.error());
  req.cwd = *cwd;
  if (args.contains("timeout_s")) {
    const json& t = args.at("timeout_s");
    if (!t.is_number() || !std::isfinite(t.get<double>()) || t.get<double>() <= 0) {
      return tool_error("run_command: timeout_s must be a number of seconds above 0, got " +
                        t.dump());
    }
    const double s = std::min(t.get<double>(), options_.max_command_timeout_s);
    req.wall_timeout = std::chrono::milliseconds(std::max<int64_t>(1, int64_t(s * 1000.0)));
  }
  const Result<SubshellResult> r = shell_->run(req);
  if (!r) return error_of(r.error());
  json out{{"ended", end_reason_name(r->reason)}, {"output", render_result(*r)},
           {"elapsed_s", r->elapsed_s}};
  if (r->reason == EndReason::kExited) out["exit_code"] = r->exit_code;
  if (r->term_signal != 0) out["signal"] = r->term_signal;
  return out;
}

}  // namespace infer::tools
