// The rename race of the hostile-path suite: one thread keeps exchanging a directory inside ROOT
// with symbolic links pointing out (relative and absolute) while the VFS writes, renames, creates
// and removes through it. Whatever wins each race, nothing may land outside ROOT.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "test/tools_vfs/temp_tree.h"
#include "tools_vfs/vfs.h"

namespace infer::tools {
namespace {

using test::TempTree;

class RenameRace : public ::testing::TestWithParam<ResolverKind> {};

size_t count_entries(const std::string& dir, const std::string& containing) {
  size_t n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.path().filename().string().find(containing) != std::string::npos) ++n;
  }
  return n;
}

TEST_P(RenameRace, NothingLandsOutsideRoot) {
  TempTree tree;
  tree.dir("outside");
  tree.dir("root");
  tree.dir("root/d");
  tree.link("../outside", "root/linkrel");
  tree.link(tree.at("outside"), "root/linkabs");
  auto vfs = Vfs::open(tree.at("root"), GetParam());
  ASSERT_TRUE(vfs.ok()) << vfs.error().message;

  const int root_fd = ::open(tree.at("root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(root_fd, 0);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> flips{0};
  std::thread flipper([&] {
    for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      // Atomically swap names: "d" is the directory or a link out, never missing.
      const char* other = (i % 2 == 0) ? "linkrel" : "linkabs";
      if (::renameat2(root_fd, "d", root_fd, other, RENAME_EXCHANGE) == 0) ++flips;
    }
  });

  // Start once the flipper runs, so a loaded machine cannot make this a test without a race.
  const auto start_by = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (flips.load() == 0 && std::chrono::steady_clock::now() < start_by)
    std::this_thread::yield();
  size_t ok_writes = 0, refused = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  for (int i = 0; i < 400 && std::chrono::steady_clock::now() < deadline; ++i) {
    const std::string name = "d/f" + std::to_string(i % 8);
    if (vfs->write(name, "payload " + std::to_string(i)).ok()) {
      ++ok_writes;
    } else {
      ++refused;
    }
    (void)vfs->mkdir("d/m");
    (void)vfs->remove("d/m");
    (void)vfs->read(name, 0, 64);
  }
  stop = true;
  flipper.join();
  ::close(root_fd);

  RecordProperty("writes_ok", int(ok_writes));
  RecordProperty("writes_refused", int(refused));
  RecordProperty("flips", int(flips.load()));
  EXPECT_GT(flips.load(), 0u);
  EXPECT_GT(ok_writes + refused, 0u);
  EXPECT_EQ(count_entries(tree.at("outside"), ""), 0u) << "something landed outside ROOT";
  EXPECT_EQ(count_entries(tree.at("root"), ".infer-tmp"), 0u) << "a temporary file was left";
}

// openat2 answers EAGAIN to a ".." lookup whenever any rename on the system races it; under a
// storm of renames (here a thread's, in CI a build's) the resolver must still answer, not fail.
TEST_P(RenameRace, RenamesElsewhereDoNotFailDotDotLookups) {
  TempTree tree;
  tree.dir("root");
  tree.dir("root/a");
  tree.dir("root/a/b");
  tree.file("root/a/b/f", "x");
  tree.link("../a", "root/a/up");  // each "up" is one ".." inside ROOT
  tree.file("elsewhere", "");
  auto vfs = Vfs::open(tree.at("root"), GetParam());
  ASSERT_TRUE(vfs.ok()) << vfs.error().message;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> renames{0};
  std::thread renamer([&] {
    const std::string from = tree.at("elsewhere"), to = tree.at("elsewhere2");
    while (!stop.load(std::memory_order_relaxed)) {
      ::rename(from.c_str(), to.c_str());
      ::rename(to.c_str(), from.c_str());
      ++renames;
    }
  });
  const auto start_by = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (renames.load() == 0 && std::chrono::steady_clock::now() < start_by) {
    std::this_thread::yield();
  }
  std::string path = "a";
  for (int i = 0; i < 24; ++i) path += "/up";
  path += "/b/f";
  size_t failed = 0;
  std::string last_error;
  // Without the walk to fall back on, 2 runs in 5 saw failures (16 EAGAINs in a row): 1 and
  // 607 of the 10,000 lookups. A regression shows often, not always.
  const int lookups = GetParam() == ResolverKind::kOpenat2 ? 10000 : 1000;
  for (int i = 0; i < lookups; ++i) {
    auto s = vfs->stat(path);
    if (!s.ok()) {
      ++failed;
      last_error = s.error().message;
    }
  }
  stop = true;
  renamer.join();
  RecordProperty("renames", int(renames.load()));
  EXPECT_GT(renames.load(), 0u);
  EXPECT_EQ(failed, 0u) << last_error;
}

INSTANTIATE_TEST_SUITE_P(Resolvers, RenameRace,
                         ::testing::Values(ResolverKind::kOpenat2, ResolverKind::kWalk),
                         [](const auto& info) {
                           return info.param == ResolverKind::kOpenat2 ? "Openat2" : "Walk";
                         });

}  // namespace
}  // namespace infer::tools
