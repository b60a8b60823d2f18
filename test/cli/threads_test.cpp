// cli/threads: sysfs cpu lists, physical cores over a fake topology with SMT siblings, the
// default thread rule and the --threads check.
#include "cli/threads.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "test/cli/subprocess.h"

namespace infer::cli {
namespace {

namespace fs = std::filesystem;

TEST(Threads, ParsesCpuLists) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5"), (std::vector<int>{5}));
  EXPECT_TRUE(parse_cpu_list("3-1").empty());
  EXPECT_TRUE(parse_cpu_list("a").empty());
}

// cpuN/topology/core_cpus_list of a 4-core machine with 2-way SMT (siblings N and N + 4).
fs::path fake_smt_machine(const std::string& file = "core_cpus_list") {
  const fs::path root = test::make_temp_dir("sys_cpu");
  for (int cpu = 0; cpu < 8; ++cpu) {
    const fs::path t = root / ("cpu" + std::to_string(cpu)) / "topology";
    fs::create_directories(t);
    const int core = cpu % 4;
    std::ofstream(t / file) << core << "," << core + 4 << "\n";
  }
  return root;
}

TEST(Threads, CountsSmtSiblingsOnce) {
  const fs::path root = fake_smt_machine();
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(count_physical_cores(root, all), 4);
  // Restricted by the affinity mask: CPUs 0 and 4 are one core, 1 another.
  const std::vector<int> some = {0, 4, 1};
  EXPECT_EQ(count_physical_cores(root, some), 2);
  // A CPU without topology counts as its own core.
  const std::vector<int> unknown = {0, 9};
  EXPECT_EQ(count_physical_cores(root, unknown), 2);
  fs::remove_all(root);
  // Older kernels: thread_siblings_list.
  const fs::path old = fake_smt_machine("thread_siblings_list");
  EXPECT_EQ(count_physical_cores(old, all), 4);
  fs::remove_all(old);
}

TEST(Threads, DefaultIsOneThreadPer8MbReadAtMostThePhysicalCores) {
  constexpr size_t MB = size_t(1) << 20;
  EXPECT_EQ(default_threads(815456, 8), 1);        // e2b-mini: 0.8 MB a token
  EXPECT_EQ(default_threads(16 * MB - 1, 8), 1);
  EXPECT_EQ(default_threads(16 * MB, 8), 2);
  EXPECT_EQ(default_threads(17 * MB, 2), 2);
  EXPECT_EQ(default_threads(40 * MB, 8), 5);
  EXPECT_EQ(default_threads(1484695040, 8), 8);    // E2B at Q4_0: 1.48 GB a token
  EXPECT_EQ(default_threads(1484695040, 2), 2);
  EXPECT_EQ(default_threads(1484695040, 0), 1);
}

TEST(Threads, MoreThreadsThanCpusIsAUsageErrorUnlessForced) {
  Options o;
  o.threads = 3;
  const CpuInfo two{2, 2};
  const Result<void> r = check_threads(o, two);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message,
            "--threads 3 is more than the 2 CPUs this process may run on (2 physical cores); "
            "add --force-threads to use them anyway");
  o.force_threads = true;
  EXPECT_TRUE(check_threads(o, two).ok());
  o = Options{};
  o.threads = 2;
  EXPECT_TRUE(check_threads(o, two).ok());
  o.threads = 0;  // the default
  EXPECT_TRUE(check_threads(o, two).ok());
}

TEST(Threads, TheReportSaysWhy) {
  Options o;
  EXPECT_EQ(decode_threads(o, 815456).threads, 1);
  EXPECT_NE(decode_threads(o, 815456).report.find("cpu: 1 thread (default; model reads 0.8 MB"),
            std::string::npos);
  o.threads = 3;
  const ThreadChoice c = decode_threads(o, 815456);
  EXPECT_EQ(c.threads, 3);
  EXPECT_NE(c.report.find("cpu: 3 threads (--threads;"), std::string::npos) << c.report;
}

}  // namespace
}  // namespace infer::cli
