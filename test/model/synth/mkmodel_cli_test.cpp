// build/mkmodel: one-line errors with a non-zero exit for bad arguments, and the same checkpoint
// as write_random_checkpoint for the same seed.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "model/synth/synth_model.h"
#include "model/thread_pool.h"
#include "test/model/synth/temp_dir.h"
#include "test/test_paths.h"

namespace infer {
namespace {

using test::TempDir;

// Runs mkmodel with ARGS, stderr to ERR; returns the exit status.
int run_mkmodel(const std::string& args, const std::filesystem::path& err) {
  const std::string cmd = (test::build_dir() / "mkmodel").string() + " " + args + " 2>" +
                          err.string() + " >/dev/null";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(SynthMkmodel, BadArgumentsGiveOneLineAndExitTwo) {
  TempDir tmp;
  const std::string config =
      (test::repo_fixtures() / "gemma4-text" / "e2b-mini" / "config.json").string();
  const std::string out = (tmp / "out").string();
  for (const std::string& args : {std::string("--out ") + out, "--config " + config,
                                  "--config " + config + " --out " + out + " --dtype q4",
                                  "--config " + config + " --out " + out + " --seed x",
                                  "--config " + config + " --out " + out + " --threads 0",
                                  "--config " + config + " --out " + out + " --shard-gb -1",
                                  "--config " + config + " --out " + out + " --frobnicate 1",
                                  "--config " + config + " --out"}) {
    SCOPED_TRACE(args);
    EXPECT_EQ(run_mkmodel(args, tmp / "err.txt"), 2);
    const std::string err = test::read_file(tmp / "err.txt");
    EXPECT_TRUE(err.starts_with("mkmodel: ")) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
  EXPECT_FALSE(std::filesystem::exists(tmp / "out"));
}

TEST(SynthMkmodel, AMissingConfigExitsOne) {
  TempDir tmp;
  EXPECT_EQ(
      run_mkmodel("--config " + (tmp / "none.json").string() + " --out " + (tmp / "out").string(),
                  tmp / "err.txt"),
      1);
  EXPECT_NE(test::read_file(tmp / "err.txt").find("none.json"), std::string::npos);
}

TEST(SynthMkmodel, WritesWhatTheLibraryWrites) {
  TempDir tmp;
  const auto config = test::repo_fixtures() / "gemma4-text" / "moe-mini" / "config.json";
  ASSERT_EQ(run_mkmodel("--config " + config.string() + " --out " + (tmp / "cli").string() +
                            " --seed 42 --dtype f16 --threads 3 --shard-gb 0.00005",
                        tmp / "err.txt"),
            0)
      << test::read_file(tmp / "err.txt");
  ThreadPool pool(1);
  ASSERT_TRUE(write_random_checkpoint(config, tmp / "lib", 42, DType::kF16, pool, 50000).ok());
  const auto names = test::file_names(tmp / "lib");
  ASSERT_EQ(names, test::file_names(tmp / "cli"));
  EXPECT_GT(names.size(), 4u);  // sharded
  for (const std::string& n : names) {
    EXPECT_TRUE(test::read_file(tmp / "lib" / n) == test::read_file(tmp / "cli" / n)) << n;
  }
}

}  // namespace
}  // namespace infer
