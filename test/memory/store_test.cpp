// EpisodeStore: round trips, reopen, the victim of a full store, the lock, refusals of other
// files, models, versions and geometries, and the read-only open behind --mem-list
// (docs/MEMORY.md, "File layout").
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "memory/episode_store.h"
#include "memory/mem_list.h"
#include "memory/store_format.h"
#include "test/memory/store_fixture.h"

namespace infer::memory {
namespace {

TEST_F(StoreTest, RoundTripAndReopen) {
  const StoreGeometry g = small_geometry();
  {
    auto s = must_open(path(), g);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->size(), 0u);
    EXPECT_TRUE(s->problems().empty());
    for (uint64_t want = 1; want <= 5; ++want) {
      ASSERT_EQ(s->next_id(), want);
      auto id = s->append(make_episode(want, g), 0);
      ASSERT_TRUE(id.ok()) << id.error().message;
      EXPECT_EQ(*id, want);
    }
    for (uint64_t id = 1; id <= 5; ++id) {
      auto e = s->read(id);
      ASSERT_TRUE(e.ok());
      EXPECT_TRUE(same_content(*e, id, g));
    }
    ASSERT_TRUE(s->touch(2, 2.5f, 123456, 3).ok());
    ASSERT_TRUE(s->forget(4).ok());
    EXPECT_FALSE(s->forget(4).ok());
    EXPECT_FALSE(s->read(4).ok());
    const std::vector<uint8_t> cb = {1, 2, 3, 4, 5};
    ASSERT_TRUE(s->set_codebooks(cb).ok());
    EXPECT_FALSE(s->set_codebooks(cb).ok());  // set once
    int keys = 0;
    s->for_each_key([&](const EpisodeInfo& info, std::span<const float> key) {
      ASSERT_EQ(key.size(), g.key_floats);
      EXPECT_EQ(key[1], float(info.id) + 0.5f);
      ++keys;
    });
    EXPECT_EQ(keys, 4);
  }
  auto s = must_open(path(), g);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->problems().empty());
  const std::vector<EpisodeInfo> l = s->list();
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[0].id, 1u);
  EXPECT_EQ(l[1].id, 2u);
  EXPECT_EQ(l[2].id, 3u);
  EXPECT_EQ(l[3].id, 5u);
  EXPECT_EQ(l[1].strength, 2.5f);
  EXPECT_EQ(l[1].recalled_ms, 123456);
  EXPECT_EQ(l[1].recalls, 3u);
  EXPECT_EQ(l[0].strength, 1.0f);
  EXPECT_EQ(s->next_id(), 6u);  // ids never reused
  for (const EpisodeInfo& info : l) {
    auto e = s->read(info.id);
    ASSERT_TRUE(e.ok());
    EXPECT_TRUE(same_content(*e, info.id, g));
  }
  const std::vector<uint8_t> cb = {1, 2, 3, 4, 5};
  EXPECT_EQ(std::vector<uint8_t>(s->codebooks().begin(), s->codebooks().end()), cb);
}

TEST_F(StoreTest, FullStoreReplacesTheVictim) {
  const StoreGeometry g = small_geometry();
  auto s = must_open(path(), g);
  ASSERT_TRUE(s);
  for (uint64_t id = 1; id <= g.capacity; ++id) ASSERT_TRUE(s->append(make_episode(id, g), 0).ok());
  EXPECT_FALSE(s->append(make_episode(9, g), 0).ok());   // full, no victim
  EXPECT_FALSE(s->append(make_episode(9, g), 99).ok());  // not an episode
  for (uint64_t id = 9; id < 40; ++id) {
    auto got = s->append(make_episode(id, g), id - g.capacity);  // the oldest each time
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ(*got, id);
    EXPECT_EQ(s->size(), g.capacity);
  }
  s.reset();
  s = must_open(path(), g);
  ASSERT_TRUE(s);
  const auto l = s->list();
  ASSERT_EQ(l.size(), g.capacity);
  for (size_t i = 0; i < l.size(); ++i) {
    EXPECT_EQ(l[i].id, 40 - g.capacity + i);
    EXPECT_TRUE(same_content(*s->read(l[i].id), l[i].id, g));
  }
}

TEST_F(StoreTest, SecondOpenIsRefusedWithTheOwnersPid) {
  const StoreGeometry g = small_geometry();
  auto s = must_open(path(), g);
  ASSERT_TRUE(s);
  auto again = EpisodeStore::open(path(), g);  // same process
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("in use by pid " + std::to_string(getpid())),
            std::string::npos);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto other = EpisodeStore::open(path(), g);
    const std::string msg = other.ok() ? "opened" : other.error().message;
    (void)!write(fds[1], msg.data(), msg.size());
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(msg, path() + ": in use by pid " + std::to_string(getpid()));
  // Still ours: the refused opens did not drop the lock.
  EXPECT_TRUE(s->append(make_episode(1, g), 0).ok());
}

TEST_F(StoreTest, RefusesOtherFilesModelsVersionsAndGeometries) {
  const StoreGeometry g = small_geometry();
  ASSERT_TRUE(must_open(path(), g));
  StoreGeometry other = g;
  other.model_fingerprint ^= 1;
  auto r = EpisodeStore::open(path(), other);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(path() + ": made for another model"), std::string::npos);
  other = g;
  other.capacity = 16;
  r = EpisodeStore::open(path(), other);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, path() + ": geometry differs: capacity 8 in the file, 16 asked");
  other = g;
  other.payload_bytes = 65;
  r = EpisodeStore::open(path(), other);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("payload_bytes 64 in the file, 65 asked"), std::string::npos);

  std::vector<uint8_t> bytes = read_bytes(path());
  std::vector<uint8_t> v2 = bytes;
  format::put<uint32_t>(v2.data(), format::kPrefixVersion, format::kVersion + 1);
  write_bytes(path("v2.bin"), v2);
  r = EpisodeStore::open(path("v2.bin"), g);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, path("v2.bin") + ": format version " +
                                   std::to_string(format::kVersion + 1) + " (this build reads " +
                                   std::to_string(format::kVersion) + ")");

  write_bytes(path("text.bin"), std::vector<uint8_t>(10000, 'x'));
  r = EpisodeStore::open(path("text.bin"), g);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, path("text.bin") + ": not an episodic memory file");
  r = EpisodeStore::open_read_only(path("text.bin"));
  ASSERT_FALSE(r.ok());

  std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 100);
  write_bytes(path("cut.bin"), cut);
  r = EpisodeStore::open(path("cut.bin"), g);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, path("cut.bin") + ": truncated file (size " +
                                   std::to_string(cut.size()) + ", expected " +
                                   std::to_string(bytes.size()) + ")");

  std::vector<uint8_t> both = bytes;
  const auto l = *format::layout_of(g);
  both[l.header_offset[0] + 50] ^= 1;
  both[l.header_offset[1] + 50] ^= 1;
  write_bytes(path("both.bin"), both);
  r = EpisodeStore::open(path("both.bin"), g);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, path("both.bin") + ": both header pages damaged");
}

TEST_F(StoreTest, ReadOnlyOpenAndMemList) {
  const StoreGeometry g = small_geometry();
  {
    auto s = must_open(path(), g);
    ASSERT_TRUE(s);
    for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(s->append(make_episode(id, g), 0).ok());
    EXPECT_FALSE(EpisodeStore::open_read_only(path()).ok());  // our own writer's lock
  }
  auto r = EpisodeStore::open_read_only(path());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->geometry().payload_bytes, g.payload_bytes);
  EXPECT_EQ((*r)->size(), 3u);
  EXPECT_FALSE((*r)->append(make_episode(4, g), 0).ok());
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* out = open_memstream(&buf, &len);
  ASSERT_TRUE(print_mem_list(path(), out).ok());
  std::fclose(out);
  const std::string text(buf, len);
  std::free(buf);
  EXPECT_NE(text.find("3 of 8 episodes"), std::string::npos) << text;
  EXPECT_NE(text.find("2  pos 200..203  3 tokens  strength 1.000"), std::string::npos) << text;
  EXPECT_NE(text.find("\"episode 3 \xc3\xa9\""), std::string::npos) << text;
}

}  // namespace
}  // namespace infer::memory
