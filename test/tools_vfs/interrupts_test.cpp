// The interrupt state machine (tools_vfs/interrupts.h): coalescing, every transition and its
// event, snoozes ended by the turn and by an injected clock, refusals, a full event queue, and
// threads raising, acting and taking at once.
#include "tools_vfs/interrupts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace infer::tools {
namespace {

using namespace std::chrono_literals;
using Kind = InterruptEventKind;

constexpr InterruptSource kPty1{SourceKind::kPty, 1};
constexpr InterruptSource kPty2{SourceKind::kPty, 2};

// A clock the test moves by hand.
struct FakeClock {
  InterruptSet::Clock::time_point t{};
  std::function<InterruptSet::Clock::time_point()> fn() {
    return [this] { return t; };
  }
};

std::vector<Kind> kinds(const std::vector<InterruptEvent>& events) {
  std::vector<Kind> out;
  for (const auto& e : events) out.push_back(e.kind);
  return out;
}

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

TEST(Interrupts, TooManyLiveSourcesAreRefusedUntilOneEnds) {
  InterruptLimits lim;
  lim.max_live = 2;
  InterruptSet set(lim);
  const InterruptId a = *set.raise({SourceKind::kPty, 1}, "a");
  ASSERT_TRUE(set.raise({SourceKind::kSubshell, 1}, "b").ok());
  const auto refused = set.raise({SourceKind::kClient, 1}, "c");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("client 1"), std::string::npos);
  EXPECT_TRUE(set.raise({SourceKind::kPty, 1}, "more").ok());  // coalescing still works
  ASSERT_TRUE(set.drop(a).ok());
  EXPECT_TRUE(set.raise({SourceKind::kClient, 1}, "c").ok());
}

// A full queue loses nothing: decisions are refused, a new interrupt is held and raised once the
// events are read, a due snooze waits, and an ack's injection always has its slot.
TEST(Interrupts, AFullEventQueueDelaysOrRefusesButNeverLosesAnEvent) {
  FakeClock clock;
  InterruptLimits lim;
  lim.event_capacity = 4;
  InterruptSet set(lim, clock.fn());
  const InterruptId a = *set.raise({SourceKind::kPty, 1}, "a");     // 1 event
  const InterruptId b = *set.raise({SourceKind::kPty, 2}, "b");     // 2
  ASSERT_TRUE(set.ack(a).ok());                                     // 3, + 1 reserved
  EXPECT_EQ(set.ack(b).error().code, ErrorCode::kInvalidArgument);  // needs 2 more
  EXPECT_FALSE(set.snooze(b).ok());
  const InterruptId c = *set.raise({SourceKind::kPty, 3}, "c");  // held, unannounced
  EXPECT_EQ(set.pending_count(), 1);                             // b only
  EXPECT_EQ(set.list().size(), 2u);
  EXPECT_EQ(set.ack(c).error().code, ErrorCode::kNotFound);     // not raised yet
  EXPECT_EQ(set.raise({SourceKind::kPty, 3}, "+").value(), c);  // but it coalesces
  EXPECT_EQ(set.take_acked().size(), 1u);  // the reserved slot: queue now full (4)
  std::vector<InterruptEvent> all = set.take_events();
  EXPECT_EQ(kinds(all), (std::vector{Kind::kRaised, Kind::kRaised, Kind::kAcked, Kind::kInjected}));
  // Reading made room: the held interrupt is raised now, with all it coalesced.
  EXPECT_EQ(set.pending_count(), 2);
  EXPECT_EQ(*set.text(c), "c+");
  ASSERT_TRUE(set.snooze(b, 10ms).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(set.snooze(c, 1000ms).ok());  // full again: 4 events
  clock.t += 20ms;
  EXPECT_EQ(set.wake_due(), 0u);  // b is due, but its woke event has no room yet
  for (const auto& e : set.take_events()) all.push_back(e);  // wakes b after reading
  for (const auto& e : set.take_events()) all.push_back(e);
  EXPECT_EQ(set.pending_count(), 1);
  EXPECT_EQ(all.back().kind, Kind::kWoke);
  EXPECT_EQ(all.back().id, b);
  // A turn that ends while the queue is full: the snooze is over, its event waits for room.
  ASSERT_TRUE(set.snooze(b).ok());                                      // until the turn ends
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(set.snooze(c, 1000ms).ok());  // full: 4 events
  set.end_turn();
  EXPECT_EQ(set.pending_count(), 0);
  for (const auto& e : set.take_events()) all.push_back(e);
  EXPECT_EQ(set.pending_count(), 1);
  for (const auto& e : set.take_events()) all.push_back(e);
  EXPECT_EQ(all.back().kind, Kind::kWoke);
  EXPECT_EQ(all.back().id, b);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].seq, i + 1) << "no gap, no repeat";
}

TEST(Interrupts, TheTimerWakesASnoozeOnTheRealClockAndStops) {
  InterruptSet set;
  const InterruptId a = *set.raise(kPty1, "a");
  std::thread timer([&] { set.run_timer(); });
  ASSERT_TRUE(set.snooze(a, 50ms).ok());
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (set.pending_count() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(set.pending_count(), 1);
  const auto t0 = std::chrono::steady_clock::now();
  set.stop_timer();  // with no deadline left the timer sleeps up to 1 s: it must end at once
  timer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 500ms);
  set.run_timer();  // stopped for good: returns at once
}

TEST(Interrupts, TakeEventsWaitsBoundedForTheNextEvent) {
  InterruptSet set;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(set.take_events(30ms).empty());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 25ms);
  std::thread raiser([&] {
    std::this_thread::sleep_for(20ms);
    (void)set.raise(kPty1, "x");
  });
  const auto got = set.take_events(5000ms);
  raiser.join();
  ASSERT_EQ(got.size(), 1u);
}

// Drain threads raise, a front end acks, snoozes and drops, the decode thread takes: every
// byte raised is either injected or dropped or still live, every event arrives once, in order,
// and the counts end consistent.
TEST(Interrupts, ThreadsRaiseActAndTakeAtOnceWithoutLosingAnything) {
  InterruptLimits lim;
  lim.max_text_bytes = 4096;  // cut often: raised_bytes still accounts for every byte
  lim.event_capacity = 64;
  InterruptSet set(lim);
  constexpr int kSources = 4, kBursts = 2000;
  std::atomic<bool> raising{true};
  std::atomic<uint64_t> injected_bytes{0}, raised_bytes{0}, drops{0}, injections{0};
  std::atomic<uint64_t> acks{0}, refused_acks{0};
  std::vector<InterruptEvent> events;
  std::mutex events_mu;
  std::vector<std::thread> raisers;
  // Each raiser goes on past kBursts until the others have dropped and injected something
  // (bounded), so that the run always crosses every transition.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (int s = 0; s < kSources; ++s) {
    raisers.emplace_back([&, s] {
      for (int i = 0; i < kBursts || ((drops.load() < 10 || injections.load() < 10) &&
                                      std::chrono::steady_clock::now() < deadline);
           ++i) {
        while (!set.raise({SourceKind::kPty, uint64_t(s)}, "0123456789").ok()) {
          std::this_thread::yield();
        }
        raised_bytes += 10;
        // A drain thread raises once per read round, not in a tight loop: four threads that
        // never pause could starve the others of the (unfair) mutex on a loaded machine.
        if (i % 32 == 31) std::this_thread::sleep_for(50us);
      }
    });
  }
  std::thread decoder([&] {
    while (raising.load() || set.acked_count() > 0) {
      for (const auto& t : set.take_acked()) {
        injected_bytes += t.raised_bytes;
        ++injections;
      }
      std::this_thread::yield();
    }
  });
  std::thread reader([&] {
    while (raising.load()) {
      auto got = set.take_events(1ms);
      std::lock_guard lock(events_mu);
      events.insert(events.end(), got.begin(), got.end());
    }
  });
  std::thread front([&] {
    uint64_t n = 0;
    while (raising.load()) {
      for (const auto& info : set.list()) {
        switch (n++ % 4) {
          case 0:
          case 1:
            ++(set.ack(info.id).ok() ? acks : refused_acks);
            break;
          case 2:
            (void)set.snooze(info.id);
            break;
          case 3: {
            const Result<std::string> t = set.text(info.id);
            if (t.ok() && set.drop(info.id).ok()) ++drops;  // bytes: from the event
            break;
          }
        }
      }
      set.end_turn();
    }
  });
  for (auto& t : raisers) t.join();
  raising.store(false);
  decoder.join();
  reader.join();
  front.join();
  for (const auto& t : set.take_acked()) injected_bytes += t.raised_bytes;
  for (const auto& e : set.take_events()) events.push_back(e);
  for (const auto& e : set.take_events()) events.push_back(e);
  uint64_t live = 0;
  for (const auto& info : set.list()) live += info.text_bytes + info.dropped_bytes;
  uint64_t dropped = 0, injected_by_events = 0;
  std::set<InterruptId> ended;
  for (size_t i = 0; i < events.size(); ++i) {
    ASSERT_EQ(events[i].seq, i + 1);
    if (events[i].kind == Kind::kDropped) dropped += events[i].raised_bytes;
    if (events[i].kind == Kind::kInjected) injected_by_events += events[i].raised_bytes;
    if (events[i].kind == Kind::kDropped || events[i].kind == Kind::kInjected) {
      EXPECT_TRUE(ended.insert(events[i].id).second) << "ended twice: " << events[i].id;
    }
  }
  EXPECT_EQ(injected_by_events, injected_bytes.load());
  EXPECT_EQ(injected_bytes.load() + dropped + live, raised_bytes.load());
  EXPECT_GE(raised_bytes.load(), uint64_t(kSources) * kBursts * 10);
  EXPECT_GE(drops.load(), 10u);
  EXPECT_GE(injections.load(), 10u) << acks << " acks, " << refused_acks << " refused, "
                                     << events.size() << " events";
  EXPECT_EQ(set.acked_count(), 0);
  int64_t pending = 0;
  for (const auto& info : set.list()) pending += info.state == InterruptState::kPending;
  EXPECT_EQ(set.pending_count(), pending);
}

}  // namespace
}  // namespace infer::tools
