// recall_fidelity: the logits after a recall with coded rows against the same rows uncompressed
// (recall_fidelity.h), one JSON line per codec setting, for a fixture or a random checkpoint.
//
//   recall_fidelity --model DIR | --config CONFIG.json [--quant q8|q4] [--stages 2,4,8,16]
//                   [--bits 7] [--sub 32] [--episodes 8] [--train-tokens 256] [--first-query 4]
//                   [--queries 4] [--follow 64] [--seed 1] [--threads 2] [--dir /tmp]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/recall_fidelity.h"

namespace infer {
namespace {

struct Args {
  std::string model_dir, config;
  Quant quant = Quant::kAsStored;
  std::vector<int> stages = {2, 4, 8, 16}, bits = {7}, subs = {32};
  int threads = 2;
  bench::FidelitySetup setup;
};

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  return out;
}

nlohmann::json agreement(const bench::LogitAgreement& a) {
  return {{"kl_mean", a.kl_mean}, {"kl_max", a.kl_max}, {"greedy", a.greedy}};
}

int run(const Args& a) {
  ThreadPool pool(a.threads);
  const LoadOptions opts{a.quant, EmbedScale::kTableDtype};
  Result<std::unique_ptr<Model>> m = make_error(ErrorCode::kInvalidArgument, "no model");
  const std::string name = a.config.empty() ? a.model_dir : a.config;
  if (!a.config.empty()) {
    std::ifstream f(a.config);
    std::stringstream ss;
    ss << f.rdbuf();
    m = Model::random(ss.str(), 1, DType::kBF16, opts, pool);
  } else {
    m = Model::load(a.model_dir, opts, pool);
  }
  if (!m.ok()) {
    std::fprintf(stderr, "recall_fidelity: %s\n", m.error().message.c_str());
    return 1;
  }
  std::vector<memory::SrvqConfig> codecs;
  for (int sub : a.subs)
    for (int bits : a.bits)
      for (int st : a.stages) {
        memory::SrvqConfig c;
        c.sub_dim = sub;
        c.code_bits = bits;
        c.stages = st;
        codecs.push_back(c);
      }
  auto rep = bench::measure_fidelity(**m, pool, a.setup, codecs);
  if (!rep.ok()) {
    std::fprintf(stderr, "recall_fidelity: %s\n", rep.error().message.c_str());
    return 1;
  }
  const bench::FidelityReport& r = rep.value();
  for (const bench::CodecFidelity& f : r.codecs) {
    const nlohmann::json j = {{"model", name},
                              {"sub_dim", f.srvq.sub_dim},
                              {"code_bits", f.srvq.code_bits},
                              {"stages", f.srvq.stages},
                              {"bits_per_element", f.bits_per_element},
                              {"k_err", f.k_err},
                              {"v_err", f.v_err},
                              {"coded_vs_raw", agreement(f.vs_raw)},
                              {"none_vs_raw", agreement(r.none)},
                              {"raw_repeat", agreement(r.repeat)},
                              {"positions", r.positions},
                              {"first_hits", r.first_hits},
                              {"train_tokens", a.setup.train_tokens},
                              {"first_query", a.setup.first_query},
                              {"queries", a.setup.queries},
                              {"seconds", r.seconds}};
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

}  // namespace
}  // namespace infer

int main(int argc, char** argv) {
  infer::Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "recall_fidelity: %s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--model") a.model_dir = next();
    else if (k == "--config") a.config = next();
    else if (k == "--stages") a.stages = infer::parse_list(next());
    else if (k == "--bits") a.bits = infer::parse_list(next());
    else if (k == "--sub") a.subs = infer::parse_list(next());
    else if (k == "--episodes") a.setup.episodes = std::stoi(next());
    else if (k == "--queries") a.setup.queries = std::stoi(next());
    else if (k == "--train-tokens") a.setup.train_tokens = std::stoi(next());
    else if (k == "--first-query") a.setup.first_query = std::stoi(next());
    else if (k == "--follow") a.setup.follow_tokens = std::stoi(next());
    else if (k == "--seed") a.setup.seed = std::stoull(next());
    else if (k == "--threads") a.threads = std::stoi(next());
    else if (k == "--dir") a.setup.dir = next();
    else if (k == "--quant") {
      const std::string q = next();
      a.quant = q == "q8" ? infer::Quant::kQ8_0
                : q == "q4" ? infer::Quant::kQ4_0
                            : infer::Quant::kAsStored;
    } else {
      std::fprintf(stderr,
                   "usage: recall_fidelity --model DIR | --config CONFIG.json [--quant q8|q4] "
                   "[--stages 2,4,8,16] [--bits 7] [--sub 32] [--episodes 8] "
                   "[--train-tokens 256] [--first-query 4] [--queries 4] [--follow 64] [--seed 1] "
                   "[--threads 2] [--dir /tmp]\n");
      return 2;
    }
  }
  if (a.model_dir.empty() == a.config.empty()) {
    std::fprintf(stderr, "recall_fidelity: give --model DIR or --config CONFIG.json\n");
    return 2;
  }
  return infer::run(a);
}
