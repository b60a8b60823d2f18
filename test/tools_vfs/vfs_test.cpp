// The VFS operations on well-behaved paths (tools_vfs/vfs.h), on both resolvers: list, stat,
// bounded read, write by temporary file and rename, mkdir, remove, bounded searches.
#include "tools_vfs/vfs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "test/tools_vfs/temp_tree.h"

namespace infer::tools {
namespace {

using test::TempTree;

class VfsOps : public ::testing::TestWithParam<ResolverKind> {
 protected:
  void open_vfs(VfsLimits limits = {}) {
    auto vfs = Vfs::open(tree_.base(), GetParam(), limits);
    ASSERT_TRUE(vfs.ok()) << vfs.error().message;
    vfs_.emplace(std::move(vfs).value());
  }
  TempTree tree_;
  std::optional<Vfs> vfs_;
};

TEST_P(VfsOps, OpeningAMissingOrNonDirectoryRootFails) {
  EXPECT_EQ(Vfs::open(tree_.at("missing"), GetParam()).error().code, ErrorCode::kNotFound);
  tree_.file("plain", "x");
  EXPECT_EQ(Vfs::open(tree_.at("plain"), GetParam()).error().code, ErrorCode::kInvalidArgument);
}

TEST(VfsResolverChoice, AutoPicksOpenat2WhereTheKernelHasIt) {
  TempTree tree;
  auto vfs = Vfs::open(tree.base(), ResolverKind::kAuto);
  ASSERT_TRUE(vfs.ok());
  EXPECT_EQ(vfs->resolver_kind(), ResolverKind::kOpenat2);  // Linux >= 5.6, as CI runs
}

TEST_P(VfsOps, ListIsSortedBoundedAndShowsLinks) {
  tree_.file("b.txt", "bb");
  tree_.file("a.txt", "a");
  tree_.dir("c");
  tree_.link("a.txt", "d");
  open_vfs(VfsLimits{.max_list_entries = 3});
  auto l = vfs_->list("");
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_EQ(l->total_entries, 4u);
  ASSERT_EQ(l->entries.size(), 3u);
  EXPECT_EQ(l->entries[0].name, "a.txt");
  EXPECT_EQ(l->entries[1].name, "b.txt");
  EXPECT_EQ(l->entries[1].size_bytes, 2u);
  EXPECT_EQ(l->entries[2].type, EntryType::kDirectory);
  open_vfs();
  auto all = vfs_->list(".");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->entries.size(), 4u);
  EXPECT_EQ(all->entries[3].type, EntryType::kSymlink);
  EXPECT_EQ(all->entries[3].link_target, "a.txt");
  EXPECT_EQ(vfs_->list("a.txt").error().code, ErrorCode::kIo);  // not a directory
  EXPECT_EQ(vfs_->list("nope").error().code, ErrorCode::kNotFound);
}

TEST_P(VfsOps, StatFollowsALinkInside) {
  tree_.file("f", "12345");
  tree_.link("f", "l");
  open_vfs();
  auto s = vfs_->stat("l");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->type, EntryType::kFile);
  EXPECT_EQ(s->size_bytes, 5u);
  EXPECT_EQ(vfs_->stat("")->type, EntryType::kDirectory);
}

TEST_P(VfsOps, ReadIsBoundedAndContinuesAtAnOffset) {
  tree_.file("f", "0123456789");
  tree_.dir("d");
  open_vfs(VfsLimits{.max_read_bytes = 4});
  auto a = vfs_->read("f", 0, 100);  // capped by max_read_bytes
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->bytes, "0123");
  EXPECT_EQ(a->file_size_bytes, 10u);
  EXPECT_FALSE(a->eof);
  auto b = vfs_->read("f", 8, 3);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->bytes, "89");
  EXPECT_TRUE(b->eof);
  auto past = vfs_->read("f", 50, 3);
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(past->bytes, "");
  EXPECT_TRUE(past->eof);
  EXPECT_EQ(vfs_->read("d", 0, 1).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(vfs_->read("missing", 0, 1).error().code, ErrorCode::kNotFound);
}

TEST_P(VfsOps, WriteReplacesAtomicallyKeepsModeAndLeavesNoTemporary) {
  open_vfs(VfsLimits{.max_write_bytes = 16});
  ASSERT_TRUE(vfs_->write("new.txt", "first").ok());
  EXPECT_EQ(tree_.read("new.txt"), "first");
  ASSERT_EQ(::chmod(tree_.at("new.txt").c_str(), 0600), 0);
  ASSERT_TRUE(vfs_->write("new.txt", "second").ok());
  EXPECT_EQ(tree_.read("new.txt"), "second");
  struct stat st {};
  ASSERT_EQ(::stat(tree_.at("new.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(vfs_->write("big", std::string(17, 'x')).error().code, ErrorCode::kInvalidArgument);
  tree_.dir("dir");
  EXPECT_EQ(vfs_->write("dir", "x").error().code, ErrorCode::kIo);  // EISDIR
  EXPECT_EQ(vfs_->write("missing/x", "x").error().code, ErrorCode::kNotFound);
  auto l = vfs_->list("");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->total_entries, 2u);  // new.txt and dir: no temporary left behind
}

TEST_P(VfsOps, MkdirAndRemove) {
  open_vfs();
  ASSERT_TRUE(vfs_->mkdir("d").ok());
  EXPECT_EQ(vfs_->mkdir("d").error().code, ErrorCode::kIo);  // EEXIST
  ASSERT_TRUE(vfs_->mkdir("d/e/").ok());
  ASSERT_TRUE(vfs_->write("d/e/f", "x").ok());
  EXPECT_EQ(vfs_->remove("d/e").error().code, ErrorCode::kIo);  // ENOTEMPTY
  ASSERT_TRUE(vfs_->remove("d/e/f").ok());
  ASSERT_TRUE(vfs_->remove("d/e").ok());
  ASSERT_TRUE(vfs_->remove("d").ok());
  EXPECT_FALSE(tree_.exists("d"));
  EXPECT_EQ(vfs_->remove("d").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(vfs_->mkdir(".").error().code, ErrorCode::kInvalidArgument);  // ROOT itself
}

TEST_P(VfsOps, SearchByNameIsBoundedAndDoesNotFollowLinks) {
  tree_.dir("src");
  tree_.dir("src/deep");
  tree_.file("src/main.cpp", "");
  tree_.file("src/deep/main_test.cpp", "");
  tree_.file("other.txt", "");
  tree_.link("src", "srclink");  // a link inside is listed by name but not descended
  open_vfs();
  auto r = vfs_->search_names("", "main");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->hits.size(), 2u);
  EXPECT_EQ(r->hits[0].path, "src/deep/main_test.cpp");
  EXPECT_EQ(r->hits[1].path, "src/main.cpp");
  EXPECT_FALSE(r->truncated);
  auto in_src = vfs_->search_names("./src/", "main");
  ASSERT_TRUE(in_src.ok());
  EXPECT_EQ(in_src->hits.size(), 2u);
  open_vfs(VfsLimits{.max_search_hits = 1});
  auto capped = vfs_->search_names("", "main");
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->hits.size(), 1u);
  EXPECT_TRUE(capped->truncated);
  EXPECT_EQ(vfs_->search_names("", "").error().code, ErrorCode::kInvalidArgument);
}

TEST_P(VfsOps, SearchByContentFindsLinesAndSkipsBinaryAndLargeFiles) {
  tree_.file("a.txt", "alpha\nneedle here\nbeta\nanother needle\n");
  tree_.file("bin", std::string("needle\0\0", 8));
  tree_.file("big.txt", std::string(40, 'x') + "needle");
  open_vfs(VfsLimits{.max_search_file_bytes = 40});
  auto r = vfs_->search_content("", "needle");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->hits.size(), 2u);
  EXPECT_EQ(r->hits[0].path, "a.txt");
  EXPECT_EQ(r->hits[0].line, 2u);
  EXPECT_EQ(r->hits[0].text, "needle here");
  EXPECT_EQ(r->hits[1].line, 4u);
  EXPECT_EQ(r->hits[1].text, "another needle");
  open_vfs(VfsLimits{.max_search_files = 1});
  auto few = vfs_->search_content("", "needle");
  ASSERT_TRUE(few.ok());
  EXPECT_TRUE(few->truncated);
}

INSTANTIATE_TEST_SUITE_P(Resolvers, VfsOps,
                         ::testing::Values(ResolverKind::kOpenat2, ResolverKind::kWalk),
                         [](const auto& info) {
                           return info.param == ResolverKind::kOpenat2 ? "Openat2" : "Walk";
                         });

}  // namespace
}  // namespace infer::tools
