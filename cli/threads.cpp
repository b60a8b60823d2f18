// CPU topology from sysfs and the affinity mask, and the thread-count rules of cli/threads.h.
#include "cli/threads.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <set>

namespace infer::cli {

std::vector<int> parse_cpu_list(std::string_view text) {
  std::vector<int> cpus;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(pos, comma - pos);
    const size_t dash = item.find('-');
    int lo = 0, hi = 0;
    const std::string_view a = item.substr(0, dash);
    const std::string_view b = dash == std::string_view::npos ? a : item.substr(dash + 1);
    const auto ra = std::from_chars(a.data(), a.data() + a.size(), lo);
    const auto rb = std::from_chars(b.data(), b.data() + b.size(), hi);
    if (ra.ec != std::errc() || ra.ptr != a.data() + a.size() || rb.ec != std::errc() ||
        rb.ptr != b.data() + b.size() || lo < 0 || hi < lo) {
      return {};
    }
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    pos = comma + 1;
  }
  return cpus;
}

int count_physical_cores(const std::filesystem::path& sys_cpu, std::span<const int> cpus) {
  std::set<int> cores;  // each core named by its lowest CPU
  for (int cpu : cpus) {
    const auto topology = sys_cpu / ("cpu" + std::to_string(cpu)) / "topology";
    std::vector<int> siblings;
    for (const char* name : {"core_cpus_list", "thread_siblings_list"}) {
      std::ifstream in(topology / name);
      std::string line;
      if (in && std::getline(in, line)) siblings = parse_cpu_list(line);
      if (!siblings.empty()) break;
    }
    cores.insert(siblings.empty() ? cpu : *std::min_element(siblings.begin(), siblings.end()));
  }
  return std::max<int>(1, int(cores.size()));
}

const CpuInfo& cpu_info() {
  static const CpuInfo info = [] {
    CpuInfo c;
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
      for (int i = 0; i < CPU_SETSIZE; ++i) {
        if (CPU_ISSET(i, &set)) cpus.push_back(i);
      }
    }
    if (cpus.empty()) cpus.push_back(0);
    c.cpus = int(cpus.size());
    c.physical_cores = count_physical_cores("/sys/devices/system/cpu", cpus);
    return c;
  }();
  return info;
}

int default_threads(size_t decode_bytes, int physical_cores) {
  const size_t by_size = decode_bytes / kDecodeBytesPerThread;
  return int(std::clamp<size_t>(by_size, 1, size_t(std::max(1, physical_cores))));
}

Result<void> check_threads(const Options& opts, const CpuInfo& cpu) {
  if (opts.threads <= cpu.cpus || opts.force_threads) return Ok{};
  return make_error(ErrorCode::kInvalidArgument,
                    "--threads " + std::to_string(opts.threads) + " is more than the " +
                        std::to_string(cpu.cpus) + " CPUs this process may run on (" +
                        std::to_string(cpu.physical_cores) +
                        " physical cores); add --force-threads to use them anyway");
}

int load_threads(const Options& opts) {
  return opts.threads > 0 ? opts.threads : cpu_info().physical_cores;
}

ThreadChoice decode_threads(const Options& opts, size_t decode_bytes) {
  const CpuInfo& cpu = cpu_info();
  ThreadChoice c;
  c.threads = opts.threads > 0 ? opts.threads : default_threads(decode_bytes, cpu.physical_cores);
  char buf[160];
  std::snprintf(buf, sizeof buf, "cpu: %d thread%s (%s; model reads %.1f MB a token; %d physical "
                "core%s)", c.threads, c.threads == 1 ? "" : "s",
                opts.threads > 0 ? "--threads" : "default", double(decode_bytes) / 1e6,
                cpu.physical_cores, cpu.physical_cores == 1 ? "" : "s");
  c.report = buf;
  return c;
}

void resize_pool(std::unique_ptr<ThreadPool>& pool, int threads) {
  if (pool == nullptr || pool->size() != threads) {
    pool.reset();  // its threads join before the new ones start
    pool = std::make_unique<ThreadPool>(threads);
  }
}

}  // namespace infer::cli
