// Where the tests find their fixtures and the built binaries. A missing fixture fails the
// test that needs it (never a skip).
#pragma once

#include <filesystem>
#include <string>

namespace infer::test {

// test/fixtures in the source tree (small fixtures copied into the repo).
std::filesystem::path repo_fixtures();
// ../shared/fixtures (large fixtures: e2b-vocab, the Gemma 3 tokenizer).
std::filesystem::path shared_fixtures();
// The meson build directory (for running build/infer, build/mkmodel).
std::filesystem::path build_dir();
// Reads a whole file; fails the calling test (ADD_FAILURE) and returns "" when it cannot.
std::string read_file(const std::filesystem::path& p);

}  // namespace infer::test
