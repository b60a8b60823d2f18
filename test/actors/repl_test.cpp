// build/infer's interactive session as a user meets it: piped input (one turn a line, exit at
// the end of input) and a terminal (a pseudo-terminal: type a line, watch tokens stream, Ctrl-C
// mid-generation, /stats, /quit). Uses the e2b-vocab fixture, the one with a real tokenizer.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test/test_paths.h"

namespace infer::test {
namespace {

namespace fs = std::filesystem;
constexpr auto kTimeout = std::chrono::seconds(60);

fs::path vocab_dir() { return shared_fixtures() / "gemma4-text" / "e2b-vocab"; }

std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

// Reads fd into `out` until `needle` appears after byte `from` (returns true), EOF or kTimeout.
bool read_until(int fd, std::string& out, const std::string& needle, size_t from = 0) {
  const auto deadline = std::chrono::steady_clock::now() + kTimeout;
  while (out.find(needle, from) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, int(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return false;  // EOF (EIO on a pty whose child exited)
    out.append(buf, size_t(n));
  }
  return true;
}

int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(Repl, PipedLinesAreTurnsOfOneConversationAndTheEndOfInputExits) {
  const auto golden = nlohmann::json::parse(read_file(vocab_dir() / "golden.json"), nullptr, false);
  ASSERT_TRUE(golden.is_object());
  // golden prompt 0 is this question as a chat user turn after <bos>: the REPL's first turn.
  const std::string first = golden["prompts"][0]["greedy_text"].get<std::string>();
  ASSERT_EQ(golden["prompts"][0]["text"].get<std::string>(),
            "<|turn>user\nWhat is the capital of France?<turn|>\n<|turn>model\n");

  int in[2], out[2], err[2];
  ASSERT_EQ(pipe(in), 0);
  ASSERT_EQ(pipe(out), 0);
  ASSERT_EQ(pipe(err), 0);
  std::vector<std::string> args = {(build_dir() / "infer").string(), "--model",
                                   vocab_dir().string(), "-n", "16", "--temperature", "0"};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
    execv(args[0].c_str(), argv_of(args).data());
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  const std::string lines = "What is the capital of France?\nAnd of Spain?\n";
  ASSERT_EQ(write(in[1], lines.data(), lines.size()), ssize_t(lines.size()));
  close(in[1]);  // end of input: the session must exit after the two turns
  std::string stdout_text, stderr_text;
  read_until(out[0], stdout_text, "\x01never");  // to EOF
  read_until(err[0], stderr_text, "\x01never");
  EXPECT_EQ(wait_exit(pid), 0) << stderr_text;
  close(out[0]);
  close(err[0]);
  EXPECT_TRUE(stdout_text.starts_with(first + "\n")) << stdout_text;
  EXPECT_GT(stdout_text.size(), first.size() + 2);  // the second turn's text follows
  EXPECT_NE(stderr_text.find("turn 1: 16 tokens"), std::string::npos) << stderr_text;
  EXPECT_NE(stderr_text.find("turn 2: 16 tokens"), std::string::npos) << stderr_text;
  EXPECT_EQ(stderr_text.find("turn 3"), std::string::npos) << stderr_text;
}

TEST(Repl, OnATerminalCtrlCInterruptsGenerationAndTheSessionGoesOn) {
  int master = -1;
  std::vector<std::string> args = {(build_dir() / "infer").string(), "--model",
                                   vocab_dir().string(), "-n", "5000", "--temperature", "0"};
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  if (pid == 0) {
    execv(args[0].c_str(), argv_of(args).data());
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  std::string screen;
  ASSERT_TRUE(read_until(master, screen, "> ")) << screen;

  // A line, then the tokens as they stream (far fewer than the 5000 asked for).
  const std::string line = "hello there\n";
  ASSERT_EQ(write(master, line.data(), line.size()), ssize_t(line.size()));
  ASSERT_TRUE(read_until(master, screen, "hello there\r\n")) << screen;
  const size_t answer = screen.size();
  std::string streamed;
  for (int i = 0; i < 200 && streamed.size() < 40; ++i) {
    pollfd p{master, POLLIN, 0};
    if (poll(&p, 1, 300) <= 0) continue;
    char buf[256];
    const ssize_t n = read(master, buf, sizeof buf);
    if (n <= 0) break;
    streamed.append(buf, size_t(n));
  }
  screen += streamed;
  ASSERT_GE(streamed.size(), 40u) << "no tokens streamed: " << screen;

  // Ctrl-C (the terminal turns \x03 into SIGINT): generation stops, the prompt comes back.
  ASSERT_EQ(write(master, "\x03", 1), 1);
  ASSERT_TRUE(read_until(master, screen, "[interrupted]", answer)) << screen;
  const size_t after = screen.find("[interrupted]", answer);
  ASSERT_TRUE(read_until(master, screen, "> ", after)) << screen;

  // The interrupted turn stays in the context: one turn, some tokens generated.
  const std::string stats = "/stats\n";
  ASSERT_EQ(write(master, stats.data(), stats.size()), ssize_t(stats.size()));
  const size_t stats_at = screen.size();
  ASSERT_TRUE(read_until(master, screen, "decode: ", stats_at)) << screen;
  EXPECT_NE(screen.find(", 1 turns, ", stats_at), std::string::npos) << screen.substr(stats_at);
  EXPECT_EQ(screen.find(" 0 tokens generated", stats_at), std::string::npos)
      << screen.substr(stats_at);
  EXPECT_EQ(screen.find("5000 tokens generated", stats_at), std::string::npos);

  const std::string quit = "/quit\n";
  ASSERT_EQ(write(master, quit.data(), quit.size()), ssize_t(quit.size()));
  read_until(master, screen, "\x01never", stats_at);  // to EOF
  EXPECT_EQ(wait_exit(pid), 0) << screen;
  close(master);
}

}  // namespace
}  // namespace infer::test
