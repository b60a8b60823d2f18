// Episodic memory on request through the whole pipeline (actors/memory_ops.cpp), in process on
// e2b-mini with the ring: Pipeline::memory answers a store with the episodes of what was
// appended (its pending last id read first), a query with the store, a recall of an excerpt with
// that excerpt's episode first, a forget (an unknown id refused); each change also arrives as a
// MemoryNotice naming the operation's ticket. Without memory every operation is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "actors/pipeline.h"
#include "memory/episodic_memory.h"
#include "test/actors/fixture_model.h"
#include "test/actors/recording_front_end.h"

namespace infer::test {
namespace {

constexpr uint32_t kEpisode = 16;

class MemoryFrontEnd : public RecordingFrontEnd {
 public:
  void memory_reply(const actors::MemoryReply& r) override { add([&] { replies_.push_back(r); }); }
  void memory_event(const actors::MemoryNotice& n) override { add([&] { events_.push_back(n); }); }
  std::optional<actors::MemoryReply> wait_reply(uint64_t ticket) {
    std::optional<actors::MemoryReply> found;
    wait([&] {
      for (const auto& r : replies_) {
        if (r.ticket == ticket) found = r;
      }
      return found.has_value();
    });
    return found;
  }
  // The events so far whose cause is `ticket`, after waiting for at least n of them.
  std::vector<actors::MemoryNotice> events_of(uint64_t ticket, size_t n) {
    std::vector<actors::MemoryNotice> out;
    wait([&] {
      out.clear();
      for (const auto& e : events_) {
        if (e.cause_ticket == ticket) out.push_back(e);
      }
      return out.size() >= n;
    });
    return out;
  }

 private:
  std::vector<actors::MemoryReply> replies_;
  std::vector<actors::MemoryNotice> events_;
};

class MemoryOps : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = load_fixture(fixture_dir("e2b-mini"), pool_);
    ASSERT_NE(fixture_.model, nullptr);
    path_ = std::filesystem::temp_directory_path() /
            ("infer-memory-ops-" + std::to_string(::getpid()) + ".mem");
    std::filesystem::remove(path_);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  actors::PipelineOptions options(bool memory) {
    actors::PipelineOptions o;
    o.engine.sampling.temperature = 0.0f;
    o.engine.end_ids = {1};
    o.engine.max_positions = int64_t(1) << 40;
    if (!memory) return o;
    memory::MemoryOptions mo;
    mo.path = path_.string();
    mo.episode_tokens = kEpisode;
    mo.recall_tokens = uint32_t(ring().recall);
    auto opened = memory::EpisodicMemory::open(fixture_.model->config(), mo, {});
    EXPECT_TRUE(opened.ok()) << (opened.ok() ? "" : opened.error().message);
    if (!opened.ok()) return o;
    o.memory = std::make_shared<actors::MemoryLink>();
    o.memory->memory = std::move(opened).value();
    o.memory->recall_tokens = ring().recall;
    o.memory->episode_tokens = kEpisode;
    return o;
  }
  static RingConfig ring() {
    RingConfig rc;
    rc.anchors = 4;
    rc.window = 128;
    rc.recall = 32;
    return rc;
  }
  std::shared_ptr<Forward> forward() {
    return std::make_shared<CpuForward>(*fixture_.model, pool_, ring());
  }
  static actors::MemoryOp op(uint64_t ticket, actors::MemoryOpKind kind) {
    actors::MemoryOp o;
    o.ticket = ticket;
    o.kind = kind;
    o.max_count = 100;
    return o;
  }

  ThreadPool pool_{2};
  Fixture fixture_;
  std::filesystem::path path_;
};

TEST_F(MemoryOps, StoreQueryRecallAndForgetThroughTheStream) {
  // Three different runs of ids, 48 tokens: three whole episodes.
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 48; ++i) ids.push_back(2 + (i * 37 + (i / 16) * 101) % 400);
  MemoryFrontEnd front;
  actors::Pipeline p(forward(), options(true), front);
  const uint64_t turn = p.send("", ids, /*generate=*/true, /*max_tokens=*/0);
  ASSERT_TRUE(front.wait_turn(turn).has_value());

  p.memory(op(1, actors::MemoryOpKind::kStore));
  const auto stored = front.wait_reply(1);
  ASSERT_TRUE(stored.has_value());
  ASSERT_TRUE(stored->ok) << stored->error;
  ASSERT_EQ(stored->entries.size(), 3u);  // the input's last id, still pending, was read first
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(stored->entries[i].pos0, int64_t(i * kEpisode));
    EXPECT_EQ(stored->entries[i].n_tokens, kEpisode);
  }
  const auto stored_events = front.events_of(1, 3);
  ASSERT_EQ(stored_events.size(), 3u);
  for (const auto& e : stored_events) EXPECT_EQ(e.kind, actors::MemoryEventKind::kStored);

  p.memory(op(2, actors::MemoryOpKind::kQuery));
  const auto listed = front.wait_reply(2);
  ASSERT_TRUE(listed.has_value() && listed->ok);
  EXPECT_EQ(listed->total, 3u);
  EXPECT_EQ(listed->entries.size(), 3u);
  EXPECT_EQ(listed->path, path_.string());

  actors::MemoryOp recall = op(3, actors::MemoryOpKind::kRecall);
  recall.ids.assign(ids.begin() + 16, ids.begin() + 28);  // from the second episode
  p.memory(recall);
  const auto recalled = front.wait_reply(3);
  ASSERT_TRUE(recalled.has_value());
  ASSERT_TRUE(recalled->ok) << recalled->error;
  ASSERT_FALSE(recalled->entries.empty());
  EXPECT_EQ(recalled->entries[0].id, stored->entries[1].id);
  EXPECT_EQ(recalled->position, 48 + 12);  // the query joined the conversation
  EXPECT_EQ(recalled->prefilled, 12);
  const auto recall_events = front.events_of(3, recalled->entries.size());
  EXPECT_EQ(recall_events.at(0).kind, actors::MemoryEventKind::kRecalled);
  EXPECT_EQ(recall_events.at(0).entry.id, recalled->entries[0].id);
  p.memory(op(4, actors::MemoryOpKind::kQuery));
  const auto hits = front.wait_reply(4);
  ASSERT_TRUE(hits.has_value());
  ASSERT_FALSE(hits->last_hits.empty());
  EXPECT_EQ(hits->last_hits[0].id, recalled->entries[0].id);

  actors::MemoryOp forget = op(5, actors::MemoryOpKind::kForget);
  forget.episode_id = stored->entries[0].id;
  p.memory(forget);
  const auto gone = front.wait_reply(5);
  ASSERT_TRUE(gone.has_value());
  EXPECT_TRUE(gone->ok) << gone->error;
  EXPECT_EQ(front.events_of(5, 1).at(0).kind, actors::MemoryEventKind::kForgotten);
  forget.ticket = 6;
  forget.episode_id = 999;
  p.memory(forget);
  const auto refused = front.wait_reply(6);
  ASSERT_TRUE(refused.has_value());
  EXPECT_FALSE(refused->ok);
  EXPECT_EQ(refused->code, ErrorCode::kNotFound);
  EXPECT_NE(refused->error.find("999"), std::string::npos) << refused->error;
}

TEST_F(MemoryOps, WithoutMemoryEveryOperationIsRefused) {
  MemoryFrontEnd front;
  actors::Pipeline p(forward(), options(false), front);
  p.memory(op(7, actors::MemoryOpKind::kStore));
  const auto r = front.wait_reply(7);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->ok);
  EXPECT_EQ(r->code, ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace infer::test
