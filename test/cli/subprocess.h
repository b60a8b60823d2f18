// Runs a built binary (build/infer, build/mkmodel) as a user would and captures what it printed.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace infer::test {

struct RunResult {
  int status = -1;  // exit status, or 128 + signal when killed
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `binary` with `args`; `env` entries (NAME, VALUE) are set on top of the current
// environment; `cwd` (when not empty) is the working directory. Fails the test if it cannot start.
RunResult run_binary(const std::filesystem::path& binary, const std::vector<std::string>& args,
                     const std::vector<std::pair<std::string, std::string>>& env = {},
                     const std::filesystem::path& cwd = {});

// As run_binary, with `input` as stdin (a regular file: what infer's pipe mode reads).
RunResult run_binary_with_input(const std::filesystem::path& binary,
                                const std::vector<std::string>& args, const std::string& input,
                                const std::vector<std::pair<std::string, std::string>>& env = {});

// build/infer.
std::filesystem::path infer_binary();

// A fresh, empty temporary directory, removed by the caller.
std::filesystem::path make_temp_dir(const std::string& tag);

}  // namespace infer::test
