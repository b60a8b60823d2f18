#include "cli/bench_output.h"

#include <cstdio>
#include <fstream>
#include <string>

namespace infer::cli {

Result<void> write_bench_json(const Options& opts, const nlohmann::ordered_json& j) {
  const std::string text = j.dump(2) + "\n";
  if (opts.bench_file.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return Ok{};
  }
  std::ofstream out(opts.bench_file, std::ios::binary);
  out << text;
  out.close();
  if (!out) return make_error(ErrorCode::kIo, opts.bench_file.string() + ": cannot write");
  return Ok{};
}

}  // namespace infer::cli
