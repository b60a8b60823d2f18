// Settings derived from the options: the prompt file, the quantization's name and the sampling
// parameters resolved against generation_config.json.
#include <fstream>
#include <random>
#include <sstream>

#include "cli/options.h"

namespace infer::cli {

Result<void> read_prompt_file(Options& o) {
  if (!o.prompt_file) return Ok{};
  std::ifstream in(*o.prompt_file, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || std::filesystem::is_directory(*o.prompt_file)) {
    return make_error(ErrorCode::kIo, "-f/--file: cannot read the prompt file '" +
                                          o.prompt_file->string() + "'");
  }
  o.prompt = text.str();
  return Ok{};
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
  const bool sample = o.temperature ? *o.temperature > 0.0f
                                    : (o.top_k || o.top_p || o.min_p ||
                                       gen.do_sample.value_or(false));
  if (sample) {
    p.temperature = o.temperature.value_or(gen.temperature.value_or(1.0f));
    if (p.temperature <= 0.0f) p.temperature = 1.0f;  // do_sample with temperature 0 in the file
    p.top_k = o.top_k.value_or(gen.top_k.value_or(50));
    p.top_p = o.top_p.value_or(gen.top_p.value_or(1.0f));
    p.min_p = o.min_p.value_or(0.0f);
  }
  // The repeat penalty applies to greedy decoding too (llama.cpp applies it before any sampler).
  p.repeat_penalty = o.repeat_penalty.value_or(1.0f);
  p.repeat_last_n = o.repeat_last_n.value_or(p.repeat_last_n);
  p.seed = o.seed ? *o.seed : std::random_device{}();
  return p;
}

}  // namespace infer::cli
