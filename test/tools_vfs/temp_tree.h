// TempTree: a fresh directory under $TMPDIR (or /tmp) with helpers to lay out files, directories
// and symbolic links, removed with everything in it at the end of the test.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace infer::tools::test {

class TempTree {
 public:
  TempTree() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/infer-vfs-test.XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp " << tmpl << " failed";
    base_ = tmpl;
  }
  ~TempTree() {
    std::error_code ec;
    std::filesystem::remove_all(base_, ec);  // does not follow links out
  }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  const std::string& base() const { return base_; }
  std::string at(const std::string& rel) const { return base_ + "/" + rel; }

  void dir(const std::string& rel) const { ASSERT_EQ(::mkdir(at(rel).c_str(), 0755), 0) << rel; }
  void file(const std::string& rel, const std::string& bytes) const {
    std::ofstream out(at(rel), std::ios::binary);
    out << bytes;
    ASSERT_TRUE(out.good()) << rel;
  }
  void link(const std::string& target, const std::string& rel) const {
    ASSERT_EQ(::symlink(target.c_str(), at(rel).c_str()), 0) << rel << " -> " << target;
  }
  bool exists(const std::string& rel) const {
    struct stat st {};
    return ::lstat(at(rel).c_str(), &st) == 0;
  }
  std::string read(const std::string& rel) const {
    std::ifstream in(at(rel), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::string base_;
};

}  // namespace infer::tools::test
