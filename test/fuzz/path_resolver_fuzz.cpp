// libFuzzer target: BeneathResolver (tools_vfs/resolver.h) on arbitrary paths over a fixed tree
// with links inside, out, absolute, looping and into /proc. Whatever either resolver opens must
// lie beneath ROOT (checked through /proc/self/fd), parent() must give one plain name, and the
// openat2 and walking resolvers must agree on whether a path opens and on what it opens.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "tools_vfs/resolver.h"

namespace {

using infer::tools::BeneathResolver;
using infer::tools::ResolverKind;

struct Tree {
  std::string base;  // holds root/ and what is outside it
  std::string root;  // realpath of ROOT
  BeneathResolver* openat2 = nullptr;
  BeneathResolver* walk = nullptr;
};

void must(bool ok) {
  if (!ok) __builtin_trap();
}

Tree* make_tree() {
  auto* t = new Tree;
  char tmpl[] = "/tmp/infer-path-fuzz.XXXXXX";
  must(::mkdtemp(tmpl) != nullptr);
  t->base = tmpl;
  const std::string r = t->base + "/root";
  must(::mkdir(r.c_str(), 0755) == 0);
  must(::mkdir((r + "/a").c_str(), 0755) == 0);
  must(::mkdir((r + "/a/b").c_str(), 0755) == 0);
  must(::mkdir((t->base + "/out").c_str(), 0755) == 0);
  const std::pair<const char*, const char*> links[] = {
      {"a/b", "in"},
      {"../a", "a/up"},
      {"../../../out", "a/b/esc"},
      {"..", "dotdot"},
      {"/tmp", "abs"},
      {"self", "self"},
      {"/proc/self/root", "proc"},
      {"a/b/../../a/b/.", "round"},
      {"../root/a", "back"},
  };
  for (const auto& [target, name] : links) must(::symlink(target, (r + "/" + name).c_str()) == 0);
  must(::close(::open((r + "/a/b/f").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644)) == 0);
  char real[PATH_MAX];
  must(::realpath(r.c_str(), real) != nullptr);
  t->root = real;
  t->openat2 = new BeneathResolver(BeneathResolver::open_root(r, ResolverKind::kOpenat2).value());
  t->walk = new BeneathResolver(BeneathResolver::open_root(r, ResolverKind::kWalk).value());
  return t;
}

Tree& tree() {
  static Tree* t = make_tree();
  return *t;
}

void remove_tree() {
  std::error_code ec;
  std::filesystem::remove_all(tree().base, ec);
}

// FD's path as the kernel sees it must be ROOT or below it.
void check_beneath(int fd) {
  char buf[PATH_MAX];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf) - 1);
  must(n > 0);
  const std::string_view where(buf, size_t(n));
  const std::string& root = tree().root;
  must(where == root || (where.size() > root.size() && where.substr(0, root.size()) == root &&
                         where[root.size()] == '/'));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tree();
  std::atexit(remove_tree);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view path(reinterpret_cast<const char*>(data), size);
  Tree& t = tree();
  auto a = t.openat2->open(path, O_PATH);
  auto b = t.walk->open(path, O_PATH);
  must(a.ok() == b.ok());
  if (a.ok()) {
    check_beneath(a->get());
    check_beneath(b->get());
    struct stat sa {
    }, sb{};
    must(::fstat(a->get(), &sa) == 0 && ::fstat(b->get(), &sb) == 0);
    must(sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino);
  } else {
    must(!a.error().message.empty() && !b.error().message.empty());
  }
  for (bool follow : {false, true}) {
    auto pa = t.openat2->parent(path, follow);
    auto pb = t.walk->parent(path, follow);
    must(pa.ok() == pb.ok());
    if (!pa.ok()) continue;
    for (const auto* p : {&pa.value(), &pb.value()}) {
      check_beneath(p->dir.get());
      must(!p->name.empty() && p->name != "." && p->name != ".." &&
           p->name.find('/') == std::string::npos);
    }
    struct stat sa {
    }, sb{};
    must(::fstat(pa->dir.get(), &sa) == 0 && ::fstat(pb->dir.get(), &sb) == 0);
    must(sa.st_ino == sb.st_ino && pa->name == pb->name && pa->must_be_dir == pb->must_be_dir);
  }
  return 0;
}
