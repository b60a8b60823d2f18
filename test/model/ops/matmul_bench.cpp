// Decode (T = 1) matmul throughput with weights streamed from memory: cycles over copies of one
// matrix filling ~--mb MiB (past the L3), per kernel, against a plain read of the same bytes.
//   ninja -C build matmul_bench && build/test/model/ops/matmul_bench [--mb 2048] [--threads 2]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "model/matrix.h"
#include "model/ops/matmul.h"
#include "model/ops/matmul_kernels.h"
#include "model/thread_pool.h"

namespace infer {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Read bandwidth of the whole buffer, split over the pool (the bound the kernels are held to).
double read_gbs(const std::vector<uint8_t>& buf, ThreadPool& pool) {
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<uint64_t> sums(size_t(pool.size()) * 8);
    const double t0 = now_s();
    const int64_t n = int64_t(buf.size() / 64);
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      uint64_t s[8] = {};
      const uint64_t* p = reinterpret_cast<const uint64_t*>(buf.data());
      for (int64_t i = b; i < e; ++i)
        for (int k = 0; k < 8; ++k) s[k] += p[i * 8 + k];
      sums[size_t(b * pool.size() / n) * 8] = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
    });
    const double dt = now_s() - t0;
    if (double(buf.size()) / dt / 1e9 > best) best = double(buf.size()) / dt / 1e9;
  }
  return best;
}

void bench(WeightFormat format, int64_t rows, int64_t cols, int64_t total_mb, ThreadPool& pool) {
  const size_t mat_bytes = size_t(rows) * row_bytes(format, cols);
  const int64_t copies = std::max<int64_t>(2, int64_t(total_mb << 20) / int64_t(mat_bytes));
  std::vector<uint8_t> buf(mat_bytes * size_t(copies));
  {
    // Random f32 rows, quantized once and copied: realistic scales and nibbles.
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> f(size_t(cols) * 64);
    for (auto& v : f) v = dist(rng);
    const Matrix src{WeightFormat::kF32, 64, cols, reinterpret_cast<const uint8_t*>(f.data())};
    std::vector<uint8_t> q(64 * row_bytes(format, cols));
    quantize_matrix(src, format, q.data(), pool);
    for (size_t o = 0; o < buf.size(); o += q.size()) {
      std::memcpy(buf.data() + o, q.data(), std::min(q.size(), buf.size() - o));
    }
  }
  std::vector<float> x(static_cast<size_t>(cols)), y(static_cast<size_t>(rows));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i));
  std::printf("%s %lldx%lld: %lld copies, %.0f MiB; plain read %.1f GB/s\n",
              format == WeightFormat::kQ4_0 ? "q4_0" : "q8_0", (long long)rows, (long long)cols,
              (long long)copies, double(buf.size()) / (1 << 20), read_gbs(buf, pool));
  for (const MatmulKernel& k : matmul_kernels()) {
    if (std::strcmp(k.name, "generic") == 0) continue;
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      const double t0 = now_s();
      for (int64_t c = 0; c < copies; ++c) {
        const Matrix w{format, rows, cols, buf.data() + size_t(c) * mat_bytes};
        matmul_with(k, w, x.data(), 1, y.data(), pool);
      }
      const double dt = (now_s() - t0) / double(copies);
      if (dt < best) best = dt;
    }
    std::printf("  %-11s %8.1f us/matmul  %5.1f GB/s\n", k.name, best * 1e6,
                double(mat_bytes) / best / 1e9);
  }
}

}  // namespace
}  // namespace infer

int main(int argc, char** argv) {
  int64_t mb = 2048;
  int threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--mb") == 0) mb = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
  }
  infer::ThreadPool pool(threads);
  std::printf("threads %d, isa %s\n", threads, infer::matmul_isa());
  for (infer::WeightFormat f : {infer::WeightFormat::kQ4_0, infer::WeightFormat::kQ8_0}) {
    infer::bench(f, 6144, 1536, mb, pool);
    infer::bench(f, 262144, 1536, mb, pool);
  }
  return 0;
}
