// A GoogleTest fixture with a fresh, empty directory per test (removed afterwards), for the tests
// that write files: the episode store's and the episodic memory's (test/memory, test/actors).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace infer::test {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("infer_" + std::string(info->test_suite_name()) + "_" + std::to_string(getpid()) +
            "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name = "mem.bin") const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

}  // namespace infer::test
