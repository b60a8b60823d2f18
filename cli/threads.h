// Worker threads: the CPUs this process may run on (sched_getaffinity) and their physical cores
// (SMT siblings counted once), the default count from the bytes a decode step reads, and the
// check of --threads against the machine.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "cli/options.h"
#include "model/thread_pool.h"

namespace infer::cli {

struct CpuInfo {
  int cpus = 1;            // CPUs in the affinity mask
  int physical_cores = 1;  // distinct cores among them
};

// "0-3,8,10-11" (a sysfs cpu list) -> {0, 1, 2, 3, 8, 10, 11}; empty when malformed.
std::vector<int> parse_cpu_list(std::string_view text);
// Distinct cores among `cpus`, from sys_cpu/cpuN/topology/core_cpus_list (thread_siblings_list
// on older kernels); a CPU whose topology cannot be read counts as its own core.
int count_physical_cores(const std::filesystem::path& sys_cpu, std::span<const int> cpus);
// This process's CPUs (computed once).
const CpuInfo& cpu_info();

// Below this many bytes read per decode step per thread, another thread saves less than its
// hand-offs cost (~70 parallel ops a token): on the 2-core VM of docs/PERFORMANCE.md ("Threads")
// a 0.8 MB model decoded no faster on 2 threads, a 17 MB one 35% faster.
inline constexpr size_t kDecodeBytesPerThread = size_t(8) << 20;
// The default decode threads for a model whose decode step reads decode_bytes: one per
// kDecodeBytesPerThread, at least 1, at most the physical cores.
int default_threads(size_t decode_bytes, int physical_cores);

// --threads N above the CPUs we may run on is a usage error unless --force-threads.
Result<void> check_threads(const Options& opts, const CpuInfo& cpu);
// Threads for loading (quantising is parallel and short): --threads, else the physical cores.
int load_threads(const Options& opts);

struct ThreadChoice {
  int threads = 1;
  std::string report;  // "cpu: 1 thread (model reads 0.8 MB a token; 2 physical cores)"
};
// The decode threads for a model reading decode_bytes a token: --threads, else the default.
ThreadChoice decode_threads(const Options& opts, size_t decode_bytes);
// Makes `pool` the size `threads` (a new pool when it differs; the old one must be idle).
void resize_pool(std::unique_ptr<ThreadPool>& pool, int threads);

}  // namespace infer::cli
