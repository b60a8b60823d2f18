// The REPL's PTY and interrupt commands (cli/repl_tools.h) on a temporary ROOT: opening, typing
// into and listing PTYs, their output raising interrupts, ack / snooze / drop with their
// messages, bad commands refused, and attaching through a pseudo-terminal until Ctrl-].
#include "cli/repl_tools.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cli/repl_input.h"

namespace infer::cli {
namespace {

using namespace std::chrono_literals;

// A fresh directory, removed at the end.
struct TempRoot {
  TempRoot() {
    std::string t = std::filesystem::temp_directory_path() / "infer-repl-tools.XXXXXX";
    EXPECT_NE(::mkdtemp(t.data()), nullptr);
    path = t;
  }
  ~TempRoot() { std::filesystem::remove_all(path); }
  std::string path;
};

// Runs a command with its output captured.
struct Captured {
  ToolCommandResult result;
  std::string out;
};
Captured run(ReplTools& tools, std::string_view line, AttachIo io = {}) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  Captured c;
  c.result = tools.run(line, f, io);
  std::fclose(f);
  c.out.assign(buf, len);
  std::free(buf);
  return c;
}

std::string report(ReplTools& tools) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  tools.report(f);
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  return out;
}

// Waits, bounded, until interrupt ID's text holds NEEDLE.
bool wait_text(ReplTools& tools, uint64_t id, const std::string& needle) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline) {
    const Result<std::string> t = tools.interrupts().text(id);
    if (t.ok() && t->find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST(ReplTools, ToolCommandsParseAsOneCommandWithTheirArguments) {
  for (const char* line :
       {"/pty", "/pty open bash -i", "/ack 3", "/snooze 2 1.5", "/drop 1", "/interrupts"}) {
    const ReplInput in = parse_input(line);
    EXPECT_EQ(in.command, Command::kTool) << line;
    EXPECT_EQ(in.text, line);
  }
  EXPECT_EQ(parse_input("/ptyx").command, Command::kBad);
  EXPECT_NE(repl_help().find("/pty open CMD"), std::string_view::npos);
}

TEST(ReplTools, ARootThatIsNotADirectoryIsRefused) {
  TempRoot root;
  auto t = ReplTools::open(root.path + "/missing");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("not an existing directory"), std::string::npos);
}

TEST(ReplTools, PtyOutputRaisesAnInterruptThatIsAckedSnoozedOrDropped) {
  TempRoot root;
  auto opened = ReplTools::open(root.path);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  ReplTools& tools = **opened;
  Captured c = run(tools, "/pty open sh -c 'echo hello; read x; echo got $x; read y'");
  ASSERT_TRUE(c.result.ok);
  const std::string opened_line =
      "[pty 1: sh -c 'echo hello; read x; echo got $x; read y'; /pty 1 attaches]\n";
  EXPECT_EQ(c.out.substr(0, opened_line.size()), opened_line);
  ASSERT_TRUE(wait_text(tools, 1, "hello\n"));
  // The child may print before the command returns (a loaded machine): its interrupt is then
  // reported with the command's own output, else at the next report.
  const std::string raised = c.out.substr(opened_line.size()) + report(tools);
  EXPECT_NE(raised.find("[interrupt 1 from pty 1: new output, "), std::string::npos) << raised;
  EXPECT_NE(raised.find(" bytes: /ack 1, /snooze 1, /drop 1]\n"), std::string::npos) << raised;
  c = run(tools, "/interrupts");
  EXPECT_NE(c.out.find("interrupt 1  pty 1  pending"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("\"hello\""), std::string::npos) << c.out;
  c = run(tools, "/pty");
  EXPECT_NE(c.out.find("pty 1  running"), std::string::npos) << c.out;

  c = run(tools, "/snooze 1");
  ASSERT_TRUE(c.result.ok);
  EXPECT_EQ(c.out, "[interrupt 1 from pty 1 snoozed, 6 bytes]\n");
  EXPECT_EQ(tools.interrupts().pending_count(), 0);
  tools.turn_ended();
  EXPECT_EQ(tools.interrupts().pending_count(), 1);
  c = run(tools, "/snooze 1 0.05");  // the timer thread wakes it, nobody else calls
  ASSERT_TRUE(c.result.ok);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (tools.interrupts().pending_count() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(tools.interrupts().pending_count(), 1);

  c = run(tools, "/pty 1 bob");  // typed into the PTY: coalesces into the same interrupt
  ASSERT_TRUE(c.result.ok);
  ASSERT_TRUE(wait_text(tools, 1, "got bob\n"));
  c = run(tools, "/ack 1");
  ASSERT_TRUE(c.result.ok);
  EXPECT_TRUE(c.result.continue_turn);
  EXPECT_NE(c.out.find("[interrupt 1 acked: the model goes on with it]"), std::string::npos);
  const auto taken = tools.interrupts().take_acked();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].text, "hello\nbob\ngot bob\n");
  EXPECT_NE(report(tools).find("[interrupt 1 from pty 1 injected"), std::string::npos);

  ASSERT_TRUE(run(tools, "/pty 1 more").result.ok);
  ASSERT_TRUE(wait_text(tools, 2, "more\n"));
  c = run(tools, "/drop 2");
  ASSERT_TRUE(c.result.ok);
  EXPECT_NE(c.out.find("[interrupt 2 from pty 1 dropped"), std::string::npos) << c.out;
  EXPECT_FALSE(c.result.continue_turn);
  EXPECT_TRUE(run(tools, "/pty close 1").result.ok);
  EXPECT_FALSE(run(tools, "/pty close 1").result.ok);
}

// --trace: each event an instant span on the "interrupts" track, at its time, in order.
TEST(ReplTools, EventsAreTracedAsInstantSpans) {
  struct Recorder : actors::Tracer {
    void span(const char* actor, const char* what, int64_t t0, int64_t t1, int64_t arg) override {
      spans.push_back({actor, what, t0, t1, arg});
    }
    struct Span {
      std::string actor, what;
      int64_t t0, t1, arg;
    };
    std::vector<Span> spans;
  } rec;
  TempRoot root;
  auto opened = ReplTools::open(root.path);
  ASSERT_TRUE(opened.ok());
  ReplTools& tools = **opened;
  tools.set_tracer(&rec);
  const tools::InterruptId id = *tools.interrupts().raise({tools::SourceKind::kClient, 4}, "x");
  ASSERT_TRUE(tools.interrupts().snooze(id).ok());
  ASSERT_TRUE(run(tools, "/drop " + std::to_string(id)).result.ok);
  ASSERT_EQ(rec.spans.size(), 3u);
  const char* whats[] = {"raised", "snoozed", "dropped"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rec.spans[i].actor, "interrupts");
    EXPECT_EQ(rec.spans[i].what, whats[i]);
    EXPECT_EQ(rec.spans[i].arg, int64_t(id));
    EXPECT_EQ(rec.spans[i].t0, rec.spans[i].t1);
    if (i > 0) {
      EXPECT_LE(rec.spans[i - 1].t0, rec.spans[i].t0);
    }
  }
}

TEST(ReplTools, BadCommandsAreRefusedWithoutSideEffects) {
  TempRoot root;
  auto opened = ReplTools::open(root.path);
  ASSERT_TRUE(opened.ok());
  ReplTools& tools = **opened;
  for (const char* line :
       {"/ack", "/ack x", "/ack 1", "/ack 1 2", "/drop 7", "/snooze 1 -3", "/snooze 1 abc",
        "/pty open", "/pty frob", "/pty 9", "/pty 9 text", "/pty close", "/pty close x"}) {
    const Captured c = run(tools, line);
    EXPECT_FALSE(c.result.ok) << line;
    EXPECT_FALSE(c.result.continue_turn) << line;
  }
  EXPECT_TRUE(tools.interrupts().list().empty());
  EXPECT_TRUE(tools.ptys().list().empty());
  EXPECT_EQ(run(tools, "/interrupts").out, "(no interrupts waiting)\n");
}

// Attach through a pseudo-terminal: keys reach the PTY's program, its output comes back, Ctrl-]
// returns; in pipe mode /pty N prints the recent text.
TEST(ReplTools, AttachRelaysKeysAndOutputUntilCtrlBracket) {
  TempRoot root;
  auto opened = ReplTools::open(root.path);
  ASSERT_TRUE(opened.ok());
  ReplTools& tools = **opened;
  ASSERT_TRUE(run(tools, "/pty open cat").result.ok);
  int master = -1, slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  std::thread attached([&] { (void)run(tools, "/pty 1", {slave, slave}); });
  std::string seen;
  const auto read_until = [&](const std::string& needle) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (seen.find(needle) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{master, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      const ssize_t n = read(master, buf, sizeof buf);
      if (n > 0) seen.append(buf, size_t(n));
    }
    return seen.find(needle) != std::string::npos;
  };
  EXPECT_TRUE(read_until("Ctrl-] returns"));
  ASSERT_EQ(write(master, "ping\r", 5), 5);
  EXPECT_TRUE(read_until("ping\r\nping\r\n")) << seen;  // the terminal's echo, then cat's
  ASSERT_EQ(write(master, "\x1d", 1), 1);
  EXPECT_TRUE(read_until("[pty 1: detached]")) << seen;
  if (seen.find("detached") == std::string::npos) (void)tools.ptys().close(1);  // ends attach
  attached.join();
  close(master);
  close(slave);
  // Pipe mode (not a terminal): the text so far.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const Captured c = run(tools, "/pty 1", {fds[0], fds[1]});
  close(fds[0]);
  close(fds[1]);
  EXPECT_EQ(c.out, "ping\nping\n");
}

}  // namespace
}  // namespace infer::cli
