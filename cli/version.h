// The version infer and mkmodel print for --version: meson's project version and, where the
// build found git, the commit it was built from (meson's vcs_tag, cli/version.cpp.in).
#pragma once

#include <string>

namespace infer::cli {

// "0.1.0 (git 952b12a4f0c1)", or "0.1.0" when the build had no git.
std::string version_string();

}  // namespace infer::cli
