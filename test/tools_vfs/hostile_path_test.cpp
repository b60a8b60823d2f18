// The hostile-path suite (issue 30, item 2), modelled on the kernel's openat2 selftests
// (tools/testing/selftests/openat2/resolve_test.c, RESOLVE_BENEATH cases) and run on both
// resolvers: every escape is refused with the same ErrorCode, links that stay inside work.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "test/tools_vfs/temp_tree.h"
#include "tools_vfs/vfs.h"

namespace infer::tools {
namespace {

using test::TempTree;

// B/secret and B/outdir are outside ROOT = B/root; B/root/etc/passwd is the file inside.
//   root/relsym -> etc/passwd            root/reletc -> etc/
//   root/abssym -> B/secret              root/absinside -> B/root/etc/passwd
//   root/abscheeky -> B/root/cheeky      root/dirout -> ../outdir
//   root/cheeky/passwd -> ../cheeky/../etc/../etc/passwd    (stays inside)
//   root/cheeky/self -> ../../root/                          (leaves, comes back: refused)
//   root/cheeky/dotdotlink -> ../../../../../../../../etc/passwd
//   root/cheeky/outrel -> ../../secret
//   root/chain1 -> chain2 -> cheeky/outrel      root/chainin1 -> chainin2 -> relsym
//   root/loop -> loop      root/loopa -> loopb -> loopa
//   root/proc{root,cwd,exe,fd} -> /proc/self/{root,cwd,exe,fd/N}
//   root/procrel -> ../../../../../../../../proc/self/root
//   root/creatlink -> B/newfile          root/creatrel -> ../newfile2
class HostilePath : public ::testing::TestWithParam<ResolverKind> {
 protected:
  void SetUp() override {
    const std::string B = tree_.base();
    tree_.file("secret", "outside");
    tree_.dir("outdir");
    tree_.dir("root");
    tree_.dir("root/etc");
    tree_.file("root/etc/passwd", "inside");
    tree_.dir("root/cheeky");
    tree_.link("etc/passwd", "root/relsym");
    tree_.link("etc/", "root/reletc");
    tree_.link(B + "/secret", "root/abssym");
    tree_.link(B + "/root/etc/passwd", "root/absinside");
    tree_.link(B + "/root/cheeky", "root/abscheeky");
    tree_.link("../outdir", "root/dirout");
    tree_.link("../cheeky/../etc/../etc/passwd", "root/cheeky/passwd");
    tree_.link("../../root/", "root/cheeky/self");
    tree_.link("../../../../../../../../etc/passwd", "root/cheeky/dotdotlink");
    tree_.link("../../secret", "root/cheeky/outrel");
    tree_.link("chain2", "root/chain1");
    tree_.link("cheeky/outrel", "root/chain2");
    tree_.link("chainin2", "root/chainin1");
    tree_.link("relsym", "root/chainin2");
    tree_.link("loop", "root/loop");
    tree_.link("loopb", "root/loopa");
    tree_.link("loopa", "root/loopb");
    tree_.link("/proc/self/root", "root/procroot");
    tree_.link("/proc/self/cwd", "root/proccwd");
    tree_.link("/proc/self/exe", "root/procexe");
    held_fd_ = ::open((B + "/secret").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(held_fd_, 0);
    tree_.link("/proc/self/fd/" + std::to_string(held_fd_), "root/procfd");
    tree_.link("../../../../../../../../proc/self/root", "root/procrel");
    tree_.link(B + "/newfile", "root/creatlink");
    tree_.link("../newfile2", "root/creatrel");
    auto vfs = Vfs::open(tree_.at("root"), GetParam());
    ASSERT_TRUE(vfs.ok()) << vfs.error().message;
    ASSERT_EQ(vfs->resolver_kind(), GetParam());
    vfs_.emplace(std::move(vfs).value());
  }
  void TearDown() override {
    if (held_fd_ >= 0) ::close(held_fd_);
  }

  // PATH is refused for read and stat with kInvalidArgument and a message.
  void expect_refused(const std::string& path) {
    SCOPED_TRACE("path \"" + path + "\"");
    auto r = vfs_->read(path, 0, 100);
    ASSERT_FALSE(r.ok()) << "read gave \"" << r->bytes << "\"";
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << r.error().message;
    EXPECT_FALSE(r.error().message.empty());
    auto s = vfs_->stat(path);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument) << s.error().message;
  }
  // PATH reads the file inside ROOT.
  void expect_inside(const std::string& path) {
    SCOPED_TRACE("path \"" + path + "\"");
    auto r = vfs_->read(path, 0, 100);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->bytes, "inside");
  }

  TempTree tree_;
  std::optional<Vfs> vfs_;
  int held_fd_ = -1;
};

TEST_P(HostilePath, DotDotChainsAreRefused) {
  for (const char* p :
       {"..", "../", "../root/etc/passwd", "etc/../..", "etc/../../secret",
        "cheeky/../../root/etc/passwd", "./../secret", "etc/../../../../../../../../etc/passwd"}) {
    expect_refused(p);
  }
  expect_inside("etc/../etc/passwd");
  expect_inside("cheeky/../etc/./passwd");
}

TEST_P(HostilePath, AbsolutePathsAreRefused) {
  for (const std::string& p : {std::string("/"), std::string("/etc/passwd"), tree_.at("secret"),
                               tree_.at("root/etc/passwd")}) {
    expect_refused(p);
  }
}

TEST_P(HostilePath, SymlinksOutAreRefused) {
  for (const char* p : {"abssym", "cheeky/self", "cheeky/self/etc/passwd", "cheeky/dotdotlink",
                        "cheeky/outrel", "abscheeky/passwd", "dirout", "dirout/x"}) {
    expect_refused(p);
  }
  for (const char* p : {"dirout", "cheeky/self", "abscheeky", "procroot", ".."}) {
    SCOPED_TRACE(p);
    EXPECT_EQ(vfs_->list(p).error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(vfs_->search_names(p, "x").error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(vfs_->search_content(p, "x").error().code, ErrorCode::kInvalidArgument);
  }
}

TEST_P(HostilePath, SearchesFromRootNeverFollowLinksOut) {
  tree_.file("outdir/needle-out", "outside");
  auto names = vfs_->search_names("", "needle");
  ASSERT_TRUE(names.ok()) << names.error().message;
  EXPECT_TRUE(names->hits.empty()) << names->hits[0].path;
  auto content = vfs_->search_content("", "outside");  // B/secret and outdir/ hold it
  ASSERT_TRUE(content.ok()) << content.error().message;
  EXPECT_TRUE(content->hits.empty()) << content->hits[0].path;
  auto inside = vfs_->search_content("", "inside");
  ASSERT_TRUE(inside.ok());
  ASSERT_EQ(inside->hits.size(), 1u);  // etc/passwd itself, not again through relsym
  EXPECT_EQ(inside->hits[0].path, "etc/passwd");
}

TEST_P(HostilePath, AbsoluteSymlinksAreRefusedEvenWhenTheyPointInside) {
  expect_refused("absinside");  // RESOLVE_BENEATH refuses any absolute link; the walk agrees
  expect_refused("abscheeky/../etc/passwd");
}

TEST_P(HostilePath, ChainedSymlinksOutAreRefused) { expect_refused("chain1"); }

TEST_P(HostilePath, LoopingSymlinksAreRefused) {
  expect_refused("loop");
  expect_refused("loopa");
  expect_refused("loopa/x");
}

TEST_P(HostilePath, ProcSelfMagicLinksThroughSymlinksAreRefused) {
  for (const char* p : {"procroot", "procroot/etc/passwd", "proccwd", "procexe", "procfd",
                        "procrel", "procrel/etc/passwd"}) {
    expect_refused(p);
  }
}

TEST_P(HostilePath, MagicLinksAreRefusedWhenRootIsInProc) {
  auto proc = Vfs::open("/proc/self", GetParam());
  ASSERT_TRUE(proc.ok()) << proc.error().message;
  for (const std::string& p :
       {std::string("root"), std::string("root/etc/passwd"), std::string("cwd"), std::string("exe"),
        "fd/" + std::to_string(held_fd_)}) {
    SCOPED_TRACE(p);
    auto r = proc->read(p, 0, 100);
    ASSERT_FALSE(r.ok()) << r->bytes;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << r.error().message;
  }
  auto status = proc->read("status", 0, 4096);  // plain files there still read
  ASSERT_TRUE(status.ok()) << status.error().message;
  EXPECT_NE(status->bytes.find("Pid:"), std::string::npos);
}

TEST_P(HostilePath, SymlinksThatStayInsideWork) {
  for (const char* p :
       {"relsym", "reletc/passwd", "reletc/../etc/passwd", "cheeky/passwd", "chainin1"}) {
    expect_inside(p);
  }
  auto listing = vfs_->list("reletc");
  ASSERT_TRUE(listing.ok()) << listing.error().message;
  ASSERT_EQ(listing->entries.size(), 1u);
  EXPECT_EQ(listing->entries[0].name, "passwd");
}

TEST_P(HostilePath, CreatingThroughASymlinkOutIsRefused) {
  for (const char* p : {"creatlink", "creatrel", "dirout/new", "abscheeky/new", "cheeky/self/new",
                        "procroot/tmp/new"}) {
    SCOPED_TRACE(p);
    auto w = vfs_->write(p, "x");
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.error().code, ErrorCode::kInvalidArgument) << w.error().message;
  }
  auto m = vfs_->mkdir("dirout/sub");
  ASSERT_FALSE(m.ok());
  EXPECT_FALSE(tree_.exists("newfile"));
  EXPECT_FALSE(tree_.exists("newfile2"));
  EXPECT_FALSE(tree_.exists("outdir/new"));
  EXPECT_FALSE(tree_.exists("outdir/sub"));
  EXPECT_TRUE(tree_.exists("root/creatlink"));  // the link is left as it was
}

TEST_P(HostilePath, WritingThroughALinkInsideReplacesItsTarget) {
  ASSERT_TRUE(vfs_->write("relsym", "rewritten").ok());
  EXPECT_EQ(tree_.read("root/etc/passwd"), "rewritten");
  char buf[64] = {};
  EXPECT_GT(::readlink(tree_.at("root/relsym").c_str(), buf, sizeof(buf) - 1), 0);
  EXPECT_STREQ(buf, "etc/passwd");
}

TEST_P(HostilePath, RemovingALinkOutRemovesTheLinkNotItsTarget) {
  ASSERT_TRUE(vfs_->remove("abssym").ok());
  EXPECT_FALSE(tree_.exists("root/abssym"));
  EXPECT_EQ(tree_.read("secret"), "outside");
  ASSERT_FALSE(vfs_->remove("dirout/x").ok());
  ASSERT_FALSE(vfs_->remove("..").ok());
  ASSERT_FALSE(vfs_->remove("").ok());  // ROOT itself
}

// Found by path_resolver_fuzz: the walk dropped a final "." and opened the file itself.
TEST_P(HostilePath, ATrailingSlashOrDotOnAFileIsNotADirectory) {
  for (const char* p : {"etc/passwd/", "etc/passwd/.", "relsym/.", "cheeky/passwd/./"}) {
    SCOPED_TRACE(p);
    auto s = vfs_->stat(p);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, ErrorCode::kIo) << s.error().message;  // ENOTDIR
  }
  EXPECT_TRUE(vfs_->stat("reletc/.").ok());
  EXPECT_TRUE(vfs_->stat("etc/.").ok());
  // Writes and removes agree: "new/" is no file name, "etc/passwd/" no directory.
  EXPECT_EQ(vfs_->write("new/", "x").error().code, ErrorCode::kIo);  // EISDIR
  EXPECT_EQ(vfs_->write("new/.", "x").error().code, ErrorCode::kIo);
  EXPECT_FALSE(tree_.exists("root/new"));
  EXPECT_EQ(vfs_->remove("etc/passwd/").error().code, ErrorCode::kIo);  // ENOTDIR
  EXPECT_TRUE(tree_.exists("root/etc/passwd"));
}

TEST_P(HostilePath, NulBytesAreRefused) {
  const std::string p("etc/passwd\0../../secret", 23);
  expect_refused(p);
  EXPECT_EQ(vfs_->write(std::string("new\0x", 5), "x").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(vfs_->mkdir(std::string("\0", 1)).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(vfs_->list(std::string("etc\0", 4)).error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(tree_.exists("root/new"));
}

TEST_P(HostilePath, OverLongNamesAndPathsAreRefused) {
  const std::string name_max(255, 'n');
  ASSERT_TRUE(vfs_->write(name_max, "long").ok());  // NAME_MAX itself is fine
  EXPECT_EQ(vfs_->read(name_max, 0, 10)->bytes, "long");
  const std::string over_name(256, 'n');
  EXPECT_EQ(vfs_->write(over_name, "x").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(vfs_->read("etc/" + over_name, 0, 1).error().code, ErrorCode::kInvalidArgument);
  std::string over_path;
  while (over_path.size() <= 4096) over_path += "etc/";
  auto r = vfs_->read(over_path, 0, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_LT(r.error().message.size(), 400u);  // the message cuts the path
}

TEST_P(HostilePath, NonUtf8NamesStayBytes) {
  const std::string name = "\xff\xfe\x80-latin1-\xe9.txt";
  ASSERT_TRUE(vfs_->write(name, "bytes are bytes").ok());
  EXPECT_EQ(tree_.read("root/" + name), "bytes are bytes");
  EXPECT_EQ(vfs_->read(name, 0, 100)->bytes, "bytes are bytes");
  auto listing = vfs_->list("");
  ASSERT_TRUE(listing.ok());
  bool found = false;
  for (const EntryInfo& e : listing->entries) found = found || e.name == name;
  EXPECT_TRUE(found);
  auto bad = vfs_->read("\xff/../../secret", 0, 10);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.find('\xff'), std::string::npos);  // printable in messages
}

INSTANTIATE_TEST_SUITE_P(Resolvers, HostilePath,
                         ::testing::Values(ResolverKind::kOpenat2, ResolverKind::kWalk),
                         [](const auto& info) {
                           return info.param == ResolverKind::kOpenat2 ? "Openat2" : "Walk";
                         });

}  // namespace
}  // namespace infer::tools
