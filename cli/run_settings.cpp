// Settings derived from the options: the thread count, the quantization's name and the sampling
// parameters resolved against generation_config.json.
#include <algorithm>
#include <random>
#include <thread>

#include "cli/options.h"

namespace infer::cli {

int thread_count(const Options& o) {
  if (o.threads > 0) return o.threads;
  return std::max(1, int(std::thread::hardware_concurrency()));
}

const char* quant_name(Quant q) {
  switch (q) {
    case Quant::kAsStored:
      return "none";
    case Quant::kQ8_0:
      return "q8";
    case Quant::kQ4_0:
      return "q4";
  }
  return "?";
}

SamplingParams resolve_sampling(const Options& o, const GenerationConfig& gen) {
  SamplingParams p;
  // Greedy unless asked: HF generates greedily when do_sample is absent or false. Sampling is on
  // when --temperature > 0 is given, or --top-k/--top-p is given, or do_sample is true; then
  // unset values take generation_config.json's, else HF's defaults (temperature 1, top-k 50,
  // top-p 1).
  const bool sample =
      o.temperature ? *o.temperature > 0.0f : (o.top_k || o.top_p || gen.do_sample.value_or(false));
  if (sample) {
    p.temperature = o.temperature.value_or(gen.temperature.value_or(1.0f));
    if (p.temperature <= 0.0f) p.temperature = 1.0f;  // do_sample with temperature 0 in the file
    p.top_k = o.top_k.value_or(gen.top_k.value_or(50));
    p.top_p = o.top_p.value_or(gen.top_p.value_or(1.0f));
  }
  p.seed = o.seed ? *o.seed : std::random_device{}();
  return p;
}

}  // namespace infer::cli
