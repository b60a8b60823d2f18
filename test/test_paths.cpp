#include "test/test_paths.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace infer::test {

static std::filesystem::path from_env(const char* var) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') {
    ADD_FAILURE() << var << " is not set: run the tests through meson test";
    return {};
  }
  return v;
}

std::filesystem::path repo_fixtures() { return from_env("INFER_TEST_FIXTURES"); }
std::filesystem::path shared_fixtures() { return from_env("INFER_SHARED_FIXTURES"); }
std::filesystem::path build_dir() { return from_env("INFER_BUILD_DIR"); }

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << p;
    return {};
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace infer::test
