// Path checks and errno mapping shared by both resolvers (path_rules.h).
#include "tools_vfs/path_rules.h"

#include <cerrno>
#include <cstring>

namespace infer::tools {

Result<SplitPath> split_path(std::string_view path) {
  if (path.find('\0') != std::string_view::npos) {
    return make_error(ErrorCode::kInvalidArgument,
                      "path \"" + printable_path(path) + "\" holds a NUL byte");
  }
  if (!path.empty() && path.front() == '/') {
    return make_error(
        ErrorCode::kInvalidArgument,
        "path \"" + printable_path(path) + "\" is absolute: give a path relative to ROOT");
  }
  if (path.size() > kMaxPathBytes) {
    return make_error(ErrorCode::kInvalidArgument, "path of " + std::to_string(path.size()) +
                                                       " bytes is over the limit of " +
                                                       std::to_string(kMaxPathBytes));
  }
  SplitPath out;
  // "f/" and "f/." both name a directory (ENOTDIR on a file), though "." is dropped below.
  const size_t last_slash = path.rfind('/');
  const std::string_view last =
      last_slash == std::string_view::npos ? path : path.substr(last_slash + 1);
  out.trailing_slash = last_slash != std::string_view::npos && (last.empty() || last == ".");
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view name = path.substr(start, end - start);
    if (name.size() > kMaxNameBytes) {
      return make_error(ErrorCode::kInvalidArgument,
                        "path \"" + printable_path(path) + "\" has a name of " +
                            std::to_string(name.size()) + " bytes, over the limit of " +
                            std::to_string(kMaxNameBytes));
    }
    if (!name.empty() && name != ".") out.components.emplace_back(name);
    start = end + 1;
  }
  return out;
}

std::string join_path(const std::vector<std::string>& components, size_t count) {
  std::string out;
  for (size_t i = 0; i < count && i < components.size(); ++i) {
    if (i > 0) out += '/';
    out += components[i];
  }
  return out;
}

std::string printable_path(std::string_view path) {
  constexpr size_t kShown = 160;
  std::string out;
  for (size_t i = 0; i < path.size() && i < kShown; ++i) {
    const auto c = static_cast<unsigned char>(path[i]);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += char(c);
    }
  }
  if (path.size() > kShown) out += "... (" + std::to_string(path.size()) + " bytes)";
  return out;
}

Error escape_error(std::string_view path, std::string_view why) {
  return make_error(ErrorCode::kInvalidArgument,
                    "path \"" + printable_path(path) + "\" is refused: " + std::string(why));
}

Error errno_error(int err, std::string_view op, std::string_view path) {
  const std::string where = std::string(op) + " \"" + printable_path(path) + "\": ";
  switch (err) {
    case EXDEV:
      return escape_error(path, "it resolves outside ROOT");
    case ELOOP:
      return make_error(ErrorCode::kInvalidArgument,
                        where +
                            "too many symbolic links, a /proc magic link, or a symbolic link "
                            "where none may be followed");
    case ENAMETOOLONG:
      return make_error(ErrorCode::kInvalidArgument, where + "name too long");
    case ENOENT:
      return make_error(ErrorCode::kNotFound, where + "no such file or directory");
    default:
      return make_error(ErrorCode::kIo, where + std::strerror(err));
  }
}

}  // namespace infer::tools
