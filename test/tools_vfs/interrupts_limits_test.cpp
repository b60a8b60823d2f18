// The interrupt state machine's limits (tools_vfs/interrupts.h): too many live sources, a full
// event queue that delays or refuses but never loses an event, the timer thread on the real
// clock, bounded waits for events, and threads raising, acting and taking at once.
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
