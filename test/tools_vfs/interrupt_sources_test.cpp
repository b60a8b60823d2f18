// PTY output and finished subshells as interrupts (tools_vfs/interrupt_sources.h): a real PtySet
// on a temporary ROOT raising from its drain thread.
#include "tools_vfs/interrupt_sources.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "test/tools_vfs/pty_test_util.h"

namespace infer::tools::test {
namespace {

// Waits, bounded, until the PTY's interrupt text holds NEEDLE; returns that text.
std::string wait_interrupt_text(const InterruptSet& set, PtyId pty, const std::string& needle,
                                std::chrono::milliseconds timeout = 5000ms) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  for (;;) {
    for (const InterruptInfo& info : set.list()) {
      if (info.source == InterruptSource{SourceKind::kPty, pty}) last = *set.text(info.id);
    }
    if (last.find(needle) != std::string::npos) return last;
    if (std::chrono::steady_clock::now() >= deadline) {
      ADD_FAILURE() << "no \"" << needle << "\" in PTY " << pty << "'s interrupt: " << last;
      return last;
    }
    std::this_thread::sleep_for(10ms);
  }
}

TEST(PtyInterrupts, NewOutputRaisesOneInterruptPerPtyAndExitSaysHow) {
  TempTree tree;
  InterruptSet interrupts;
  PtyInterrupts adapter(interrupts);
  auto ptys = make_pty_set(tree, {}, adapter.callback());
  ASSERT_NE(ptys, nullptr);
  adapter.attach(ptys.get());
  const PtyId id = open_pty(*ptys, {"sh", "-c", "printf 'one\\n\\033[31mtwo\\033[0m\\n'; exit 3"});
  const std::string text = wait_interrupt_text(interrupts, id, "[exited with status 3]");
  EXPECT_EQ(text, "one\ntwo\n[exited with status 3]\n");  // escapes stripped
  EXPECT_EQ(interrupts.list().size(), 1u);
  EXPECT_EQ(interrupts.pending_count(), 1);
  EXPECT_EQ(adapter.refused(), 0u);
}

TEST(PtyInterrupts, AfterAnInjectionOnlyNewTextRaisesAgainAndAPromptIsItsPartialLine) {
  TempTree tree;
  InterruptSet interrupts;
  PtyInterrupts adapter(interrupts);
  auto ptys = make_pty_set(tree, {}, adapter.callback());
  ASSERT_NE(ptys, nullptr);
  adapter.attach(ptys.get());
  const PtyId id =
      open_pty(*ptys, {"sh", "-c", "echo first; printf 'name? '; read x; echo got $x"});
  EXPECT_EQ(wait_interrupt_text(interrupts, id, "name? "), "first\nname? ");
  const InterruptId first = interrupts.list().at(0).id;
  ASSERT_TRUE(interrupts.ack(first).ok());
  const auto taken = interrupts.take_acked();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].text, "first\nname? ");
  ASSERT_TRUE(ptys->write(id, "bob\n").ok());
  // The prompt's line, now finished with the echo, then the answer; "first" is not repeated.
  const std::string next = wait_interrupt_text(interrupts, id, "[exited");
  EXPECT_EQ(next, "name? bob\ngot bob\n[exited with status 0]\n");
  EXPECT_NE(interrupts.list().at(0).id, first);
}

TEST(PtyInterrupts, AChattyPtyCoalescesIntoOneBoundedInterrupt) {
  TempTree tree;
  InterruptLimits lim;
  lim.max_text_bytes = 1024;
  InterruptSet interrupts(lim);
  PtyInterrupts adapter(interrupts);
  auto ptys = make_pty_set(tree, {}, adapter.callback());
  ASSERT_NE(ptys, nullptr);
  adapter.attach(ptys.get());
  const PtyId id = open_pty(*ptys, {"sh", "-c",
                                    "i=0; while [ $i -lt 3000 ]; do echo line $i; "
                                    "i=$((i+1)); done"});
  const std::string text = wait_interrupt_text(interrupts, id, "[exited", 20000ms);
  EXPECT_NE(text.find("line 2999\n[exited with status 0]"), std::string::npos) << text;
  EXPECT_NE(text.find("line 0\n"), std::string::npos) << text;
  const auto info = interrupts.list();
  ASSERT_EQ(info.size(), 1u);
  EXPECT_LE(info[0].text_bytes, 1024u);
  EXPECT_GT(info[0].dropped_bytes, 20000u);
  EXPECT_GT(info[0].bursts, 0u);
  EXPECT_EQ(interrupts.take_events().size(), 1u);  // raised once, however many bursts
}

TEST(PtyInterrupts, ARefusedRaiseKeepsItsTextForTheNext) {
  TempTree tree;
  InterruptLimits lim;
  lim.max_live = 1;
  InterruptSet interrupts(lim);
  const InterruptId blocker = *interrupts.raise({SourceKind::kClient, 9}, "busy");
  PtyInterrupts adapter(interrupts);
  auto ptys = make_pty_set(tree, {}, adapter.callback());
  ASSERT_NE(ptys, nullptr);
  adapter.attach(ptys.get());
  const PtyId id = open_pty(*ptys, {"sh", "-c", "echo early; read x; echo late"});
  (void)wait_raw(*ptys, id, "early");
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (adapter.refused() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_GT(adapter.refused(), 0u);
  ASSERT_TRUE(interrupts.drop(blocker).ok());
  ASSERT_TRUE(ptys->write(id, "go\n").ok());
  EXPECT_EQ(wait_interrupt_text(interrupts, id, "[exited"),
            "early\ngo\nlate\n[exited with status 0]\n");
}

TEST(SubshellInterrupts, AFinishedRunRaisesItsRenderedResult) {
  InterruptSet interrupts;
  SubshellResult r;
  r.reason = EndReason::kExited;
  r.exit_code = 2;
  r.out = HeadTailBuffer(64, 64);
  r.out.append("oops\n");
  auto id = raise_subshell_finished(interrupts, 5, r);
  ASSERT_TRUE(id.ok());
  const auto info = interrupts.list().at(0);
  EXPECT_EQ(info.source, (InterruptSource{SourceKind::kSubshell, 5}));
  EXPECT_EQ(*interrupts.text(*id), render_result(r));
  EXPECT_NE(interrupts.text(*id)->find("oops"), std::string::npos);
}

}  // namespace
}  // namespace infer::tools::test
