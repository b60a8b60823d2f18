// fork/exec with stdout and stderr sent to temporary files, read back after the child exits.
#include "test/cli/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "test/test_paths.h"

namespace infer::test {

std::filesystem::path make_temp_dir(const std::string& tag) {
  std::string pattern = (std::filesystem::temp_directory_path() / ("infer-" + tag + "-XXXXXX"));
  if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp " << pattern;
  return pattern;
}

std::filesystem::path infer_binary() { return build_dir() / "infer"; }

namespace {

RunResult run(const std::filesystem::path& binary, const std::vector<std::string>& args,
              const std::vector<std::pair<std::string, std::string>>& env,
              const std::filesystem::path& cwd, const std::string& stdin_path) {
  RunResult r;
  if (!std::filesystem::exists(binary)) {
    ADD_FAILURE() << binary << " does not exist: build it first";
    return r;
  }
  const std::filesystem::path dir = make_temp_dir("run");
  const std::string out_path = dir / "stdout", err_path = dir / "stderr";
  const std::string abs_binary = std::filesystem::absolute(binary).string();
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int in = open(stdin_path.c_str(), O_RDONLY);
    if (out < 0 || err < 0 || in < 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(abs_binary.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(abs_binary.c_str(), argv.data());
    _exit(127);
  }
  if (pid < 0) {
    ADD_FAILURE() << "fork failed";
    return r;
  }
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  std::filesystem::remove_all(dir);
  return r;
}

}  // namespace

RunResult run_binary(const std::filesystem::path& binary, const std::vector<std::string>& args,
                     const std::vector<std::pair<std::string, std::string>>& env,
                     const std::filesystem::path& cwd) {
  return run(binary, args, env, cwd, "/dev/null");
}

RunResult run_binary_with_input(const std::filesystem::path& binary,
                                const std::vector<std::string>& args, const std::string& input,
                                const std::vector<std::pair<std::string, std::string>>& env) {
  const std::filesystem::path dir = make_temp_dir("stdin");
  const std::filesystem::path path = dir / "stdin";
  {
    std::ofstream out(path, std::ios::binary);
    out << input;
    if (!out) ADD_FAILURE() << "cannot write " << path;
  }
  RunResult r = run(binary, args, env, {}, path.string());
  std::filesystem::remove_all(dir);
  return r;
}

}  // namespace infer::test
