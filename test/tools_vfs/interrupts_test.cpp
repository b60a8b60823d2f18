// The interrupt state machine (tools_vfs/interrupts.h): coalescing, every transition and its
// event, snoozes ended by the turn and by an injected clock, refusals (interrupts_limits_test.cpp
// has the limits, a full event queue, the timer and threads).
#include "tools_vfs/interrupts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "test/tools_vfs/interrupts_test_util.h"

namespace infer::tools {
namespace {

using namespace std::chrono_literals;
using namespace test_interrupts;

TEST(Interrupts, ABurstFromOneSourceCoalescesIntoItsPendingInterrupt) {
  InterruptSet set;
  auto a = set.raise(kPty1, "one\n");
  auto b = set.raise(kPty1, "two\n");
  auto c = set.raise(kPty2, "other\n");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  EXPECT_EQ(set.pending_count(), 2);
  EXPECT_EQ(*set.text(*a), "one\ntwo\n");
  const auto events = set.take_events();
  ASSERT_EQ(events.size(), 2u);  // one raised event per interrupt, none for a coalesced burst
  EXPECT_EQ(events[0].kind, Kind::kRaised);
  EXPECT_EQ(events[0].id, *a);
  EXPECT_EQ(events[1].id, *c);
  const auto listed = set.list();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].bursts, 2u);
  EXPECT_EQ(listed[0].preview, "one");
  EXPECT_EQ(listed[0].state, InterruptState::kPending);
}

TEST(Interrupts, CoalescedTextIsBoundedAndTheDroppedBytesCounted) {
  InterruptLimits lim;
  lim.max_text_bytes = 64;  // head 16, tail 48
  InterruptSet set(lim);
  std::string all;
  for (int i = 0; i < 100; ++i) {
    const std::string line = "line " + std::to_string(i) + "\n";
    all += line;
    ASSERT_TRUE(set.raise(kPty1, line).ok());
  }
  const auto info = set.list().at(0);
  EXPECT_EQ(info.bursts, 100u);
  EXPECT_EQ(info.text_bytes + info.dropped_bytes, all.size());
  EXPECT_EQ(info.text_bytes, 64u);
  ASSERT_TRUE(set.ack(info.id).ok());
  const auto taken = set.take_acked();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].dropped_bytes, all.size() - 64);
  EXPECT_TRUE(taken[0].text.starts_with(all.substr(0, 16))) << taken[0].text;
  EXPECT_TRUE(taken[0].text.ends_with(all.substr(all.size() - 48))) << taken[0].text;
  EXPECT_NE(taken[0].text.find("dropped"), std::string::npos) << taken[0].text;
}

TEST(Interrupts, APartialLineIsReplacedNotAppended) {
  InterruptSet set;
  auto id = set.raise(kPty1, "", "Password: ");
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(set.raise(kPty1, "", "Password: ").ok());
  EXPECT_EQ(*set.text(*id), "Password: ");
  ASSERT_TRUE(set.raise(kPty1, "Password: \nok\n", "$ ").ok());  // the prompt line finished
  EXPECT_EQ(*set.text(*id), "Password: \nok\n$ ");
}

TEST(Interrupts, AckInjectsOnceInAckOrderAndEndsTheInterrupt) {
  InterruptSet set;
  const InterruptId a = *set.raise(kPty1, "from one\n");
  const InterruptId b = *set.raise(kPty2, "from two\n");
  (void)set.take_events();
  EXPECT_EQ(set.acked_count(), 0);
  EXPECT_TRUE(set.take_acked().empty());
  ASSERT_TRUE(set.ack(b).ok());
  ASSERT_TRUE(set.ack(a).ok());
  EXPECT_EQ(set.acked_count(), 2);
  EXPECT_EQ(set.pending_count(), 0);
  const auto taken = set.take_acked();
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].id, b);  // acked first
  EXPECT_EQ(taken[0].text, "from two\n");
  EXPECT_EQ(taken[1].id, a);
  EXPECT_EQ(set.acked_count(), 0);
  EXPECT_TRUE(set.take_acked().empty());  // exactly once
  EXPECT_TRUE(set.list().empty());
  const auto events = set.take_events();
  EXPECT_EQ(kinds(events),
            (std::vector{Kind::kAcked, Kind::kAcked, Kind::kInjected, Kind::kInjected}));
  EXPECT_EQ(events[2].text_bytes, 9u);
  // The source's next output is a new interrupt.
  const InterruptId c = *set.raise(kPty1, "more\n");
  EXPECT_NE(c, a);
  EXPECT_EQ(set.ack(a).error().code, ErrorCode::kNotFound);
}

TEST(Interrupts, OutputArrivingAfterAnAckGoesWithIt) {
  InterruptSet set;
  const InterruptId a = *set.raise(kPty1, "one\n");
  ASSERT_TRUE(set.ack(a).ok());
  EXPECT_EQ(*set.raise(kPty1, "two\n"), a);
  const auto taken = set.take_acked();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].text, "one\ntwo\n");
}

TEST(Interrupts, TakeAckedKeepsWhatDoesNotFitAndKeepsOrder) {
  InterruptSet set;
  const InterruptId a = *set.raise(kPty1, std::string(100, 'a'));
  const InterruptId b = *set.raise(kPty2, std::string(10, 'b'));
  ASSERT_TRUE(set.ack(a).ok());
  ASSERT_TRUE(set.ack(b).ok());
  EXPECT_TRUE(set.take_acked(50).empty());  // a does not fit, and b does not jump ahead of it
  EXPECT_EQ(set.acked_count(), 2);
  auto one = set.take_acked(SIZE_MAX, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].id, a);
  auto two = set.take_acked(10);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].id, b);
}

TEST(Interrupts, SnoozeUntilTheTurnEndsThenPendingAgain) {
  InterruptSet set;
  const InterruptId a = *set.raise(kPty1, "x\n");
  ASSERT_TRUE(set.snooze(a).ok());
  EXPECT_EQ(set.pending_count(), 0);
  EXPECT_TRUE(set.list().at(0).until_turn_end);
  EXPECT_EQ(set.wake_due(), 0u);           // no delay: only the turn's end wakes it
  EXPECT_EQ(*set.raise(kPty1, "y\n"), a);  // a snoozed interrupt still coalesces
  EXPECT_EQ(set.pending_count(), 0);
  set.end_turn();
  EXPECT_EQ(set.pending_count(), 1);
  EXPECT_EQ(set.list().at(0).state, InterruptState::kPending);
  EXPECT_EQ(kinds(set.take_events()), (std::vector{Kind::kRaised, Kind::kSnoozed, Kind::kWoke}));
  set.end_turn();  // nothing snoozed: no event
  EXPECT_TRUE(set.take_events().empty());
}

TEST(Interrupts, SnoozeForADelayWakesByTheClockNotByTheTurn) {
  FakeClock clock;
  InterruptSet set({}, clock.fn());
  const InterruptId a = *set.raise(kPty1, "x\n");
  ASSERT_TRUE(set.snooze(a, 5000ms).ok());
  ASSERT_TRUE(set.list().at(0).wake_at.has_value());
  set.end_turn();
  EXPECT_EQ(set.pending_count(), 0);
  clock.t += 4999ms;
  EXPECT_EQ(set.wake_due(), 0u);
  clock.t += 1ms;
  EXPECT_EQ(set.wake_due(), 1u);
  EXPECT_EQ(set.pending_count(), 1);
  EXPECT_EQ(set.wake_due(), 0u);
  // Any call notices a due snooze: here the next raise.
  ASSERT_TRUE(set.snooze(a, 10ms).ok());
  clock.t += 10ms;
  ASSERT_TRUE(set.raise(kPty2, "z\n").ok());
  EXPECT_EQ(set.pending_count(), 2);
  EXPECT_EQ(kinds(set.take_events()), (std::vector{Kind::kRaised, Kind::kSnoozed, Kind::kWoke,
                                                   Kind::kSnoozed, Kind::kWoke, Kind::kRaised}));
}

TEST(Interrupts, ASnoozedInterruptCanBeAckedOrDropped) {
  InterruptSet set;
  const InterruptId a = *set.raise(kPty1, "a\n");
  const InterruptId b = *set.raise(kPty2, "b\n");
  ASSERT_TRUE(set.snooze(a).ok());
  ASSERT_TRUE(set.snooze(b, 1000ms).ok());
  ASSERT_TRUE(set.ack(a).ok());
  ASSERT_TRUE(set.drop(b).ok());
  EXPECT_EQ(set.acked_count(), 1);
  EXPECT_EQ(set.pending_count(), 0);
  EXPECT_EQ(set.take_acked().size(), 1u);
}

TEST(Interrupts, DropEndsItAndAnUnknownIdIsAnError) {
  InterruptSet set;
  const InterruptId a = *set.raise(kPty1, "a\n");
  ASSERT_TRUE(set.drop(a).ok());
  EXPECT_EQ(set.pending_count(), 0);
  EXPECT_TRUE(set.list().empty());
  const Result<void> again = set.drop(a);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kNotFound);
  EXPECT_NE(again.error().message.find("interrupt " + std::to_string(a)), std::string::npos);
  EXPECT_EQ(set.drop(999).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(set.ack(999).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(set.snooze(999).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(set.text(999).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(kinds(set.take_events()), (std::vector{Kind::kRaised, Kind::kDropped}));
  // An acked interrupt may still be dropped before a boundary takes it.
  const InterruptId b = *set.raise(kPty1, "b\n");
  ASSERT_TRUE(set.ack(b).ok());
  ASSERT_TRUE(set.drop(b).ok());
  EXPECT_EQ(set.acked_count(), 0);
  EXPECT_TRUE(set.take_acked().empty());
}

TEST(Interrupts, DecisionsTheStateDoesNotAllowAreRefusedAndChangeNothing) {
  InterruptSet set;
  const InterruptId a = *set.raise(kPty1, "a\n");
  ASSERT_TRUE(set.ack(a).ok());
  const uint64_t seq = set.last_seq();
  EXPECT_EQ(set.ack(a).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(set.snooze(a).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(set.snooze(a, 0ms).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(set.snooze(a, -5ms).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(set.last_seq(), seq);
  EXPECT_EQ(set.acked_count(), 1);
}

}  // namespace
}  // namespace infer::tools
