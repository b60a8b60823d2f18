// Per-command GPU times summed per pipeline: where a decode step's and a prefill chunk's time goes.
#include "cli/gpu_profile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace infer::cli {
namespace {

nlohmann::ordered_json summarize(const std::vector<gpu::CommandTime>& times) {
  struct Sum {
    int count = 0;
    double total_us = 0, max_us = 0;
  };
  std::map<std::string, Sum> by_label;
  double total = 0;
  for (const gpu::CommandTime& t : times) {
    Sum& s = by_label[t.label];
    ++s.count;
    s.total_us += t.us;
    s.max_us = std::max(s.max_us, t.us);
    total += t.us;
  }
  std::vector<std::pair<std::string, Sum>> rows(by_label.begin(), by_label.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.total_us > b.second.total_us; });
  nlohmann::ordered_json pipelines = nlohmann::ordered_json::array();
  for (const auto& [label, s] : rows) {
    pipelines.push_back({{"pipeline", label},
                         {"count", s.count},
                         {"total_us", s.total_us},
                         {"mean_us", s.total_us / s.count},
                         {"max_us", s.max_us},
                         {"share", total > 0 ? s.total_us / total : 0.0}});
  }
  return {{"commands", times.size()}, {"gpu_us", total}, {"by_pipeline", pipelines}};
}

void print(const char* what, const nlohmann::ordered_json& j) {
  std::fprintf(stderr, "  profile %s: %zu commands, %.1f us of GPU time\n", what,
               j["commands"].get<size_t>(), j["gpu_us"].get<double>());
  int shown = 0;
  for (const auto& p : j["by_pipeline"]) {
    if (++shown > 12) break;
    std::fprintf(stderr, "    %6.1f%% %8.1f us %4d x %7.2f us  %s\n",
                 100.0 * p["share"].get<double>(), p["total_us"].get<double>(),
                 p["count"].get<int>(), p["mean_us"].get<double>(),
                 p["pipeline"].get<std::string>().c_str());
  }
}

}  // namespace

Result<nlohmann::ordered_json> profile_gpu(gpu::GpuForward& fwd, int32_t next,
                                           std::span<const int32_t> prompt, int64_t chunk) {
  nlohmann::ordered_json j;
  INFER_TRY(std::vector<gpu::CommandTime> decode, fwd.profile(std::span<const int32_t>(&next, 1)));
  j["decode_position"] = fwd.position() - 1;
  j["decode"] = summarize(decode);
  // Every command of the step in order (label, us): which product of a layer costs what, for
  // fitting a fixed cost plus bytes over bandwidth per matrix.
  nlohmann::ordered_json sequence = nlohmann::ordered_json::array();
  for (const gpu::CommandTime& t : decode) sequence.push_back({t.label, t.us});
  j["decode"]["sequence"] = std::move(sequence);
  fwd.reset();
  const size_t T = std::min(prompt.size(), size_t(chunk));
  INFER_TRY(std::vector<gpu::CommandTime> prefill, fwd.profile(prompt.first(T)));
  j["prefill_tokens"] = T;
  j["prefill"] = summarize(prefill);
  fwd.reset();
  print("decode", j["decode"]);
  print("prefill", j["prefill"]);
  return j;
}

}  // namespace infer::cli
