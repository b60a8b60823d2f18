// Prints the retrieval accuracy (recall_harness.h) of one model and the time to score 64, 1,000
// and 10,000 episode keys on one core. Usage:
//   recall_bench MODEL_DIR|CONFIG.json [--q4] [--gpu [--device N]] [--episodes N] [--queries Q]
//                [--prefix P] [--excerpt X] [--sub-spans S] [--dims D] [--lift-active K]
//                [--lift-dims M] [--layers L] [--id-weight W] [--threads T] [--diagnose]
//                [--sweep] [--query-prefix]
// --gpu runs the forward passes on the Vulkan backend (the keys are made on the CPU either way);
// --diagnose prints, per tiered layer, how alike a token's K rows are in two contexts; --sweep
// scores the same rows under other id weights, layer counts and lifts; --query-prefix makes the
// query of the prefix and the excerpt together (a turn's whole input), not the excerpt alone.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/backend.h"
#include "memory/association.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "model/thread_pool.h"
#include "test/memory/recall_harness.h"

using namespace infer;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: recall_bench MODEL_DIR|CONFIG.json [options]\n");
    return 2;
  }
  std::string path = argv[1];
  bool q4 = false;
  int threads = 2;
  cli::Options gpu_opts;
  bool sweep = false;
  test::RecallSetup su;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--q4") q4 = true;
    else if (a == "--episodes") su.episodes = val();
    else if (a == "--queries") su.queries = val();
    else if (a == "--prefix") su.prefix_tokens = val();
    else if (a == "--sub-spans") su.assoc.sub_spans = val();
    else if (a == "--dims") su.assoc.dims = val();
    else if (a == "--lift-active") su.assoc.lift_active = val();
    else if (a == "--lift-dims") su.assoc.lift_dims = val();
    else if (a == "--layers") su.assoc.max_layers = val();
    else if (a == "--threads") threads = val();
    else if (a == "--id-weight") su.assoc.id_weight = i + 1 < argc ? float(std::atof(argv[++i])) : 0.0f;
    else if (a == "--excerpt") su.excerpt_tokens = val();
    else if (a == "--diagnose") su.diagnose = true;
    else if (a == "--sweep") sweep = true;
    else if (a == "--query-prefix") su.query_prefix = true;
    else if (a == "--gpu") gpu_opts.gpu = true;
    else if (a == "--device") gpu_opts.device = val();
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  ThreadPool pool(threads);
  LoadOptions lo{q4 ? Quant::kQ4_0 : Quant::kAsStored, EmbedScale::kTableDtype};
  Result<std::unique_ptr<Model>> m = Error{ErrorCode::kInternal, ""};
  if (path.size() > 5 && path.substr(path.size() - 5) == ".json") {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    m = Model::random(ss.str(), 1, DType::kBF16, lo, pool);
  } else {
    m = Model::load(path, lo, pool);
  }
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", m.error().message.c_str());
    return 1;
  }
  auto ctx = cli::open_gpu(gpu_opts);
  if (!ctx.ok()) {
    std::fprintf(stderr, "%s\n", ctx.error().message.c_str());
    return 1;
  }
  auto backend = cli::make_backend(std::move(ctx).value(), *m.value(), pool, 0,
                                   test::recall_ring(su));
  if (!backend.ok()) {
    std::fprintf(stderr, "%s\n", backend.error().message.c_str());
    return 1;
  }
  const test::RecallRows rows = test::collect_recall_rows(*backend->forward, su);
  const auto r = test::score_recall(m.value()->config(), rows, su);
  std::printf(
      "model %s%s on %s: %d episodes x %d tokens (fresh context each), %d excerpts of %d tokens "
      "(after %d random tokens%s)\n  key: dims %d x sub-spans %d, lift %d/%d, layers %d, "
      "id weight %.2f\n"
      "  recall@1 %.3f  recall@3 %.3f  mean cos own %.3f  best other %.3f\n"
      "  forward %.1f s, keys %.1f ms\n",
      path.c_str(), q4 ? " (Q4_0)" : "", backend->name.c_str(), su.episodes, su.episode_tokens,
      su.queries, su.excerpt_tokens, su.prefix_tokens, su.query_prefix ? ", in the query" : "",
      su.assoc.dims, su.assoc.sub_spans,
      su.assoc.lift_active, su.assoc.lift_dims, su.assoc.max_layers,
      double(su.assoc.id_weight), r.recall_at1, r.recall_at3, r.mean_true_cos,
      r.mean_best_other_cos, r.forward_ms / 1000, r.key_ms);
  for (size_t l = 0; l < r.layers.size(); ++l) {
    std::printf("  layer %2d: K cos same token %.3f, next token %.3f\n", r.layers[l],
                r.layer_cos_same[l], r.layer_cos_other[l]);
  }
  if (sweep) {  // the same rows under other key configurations
    for (float w : {0.0f, 0.25f, 0.5f, 0.75f, 1.0f}) {
      for (int layers : {1, 0}) {
        for (int lift : {32, 0}) {
          if (w == 1.0f && (layers != 1 || lift != 32)) continue;  // ids only: rows unused
          test::RecallSetup v = su;
          v.diagnose = false;
          v.assoc.id_weight = w;
          v.assoc.max_layers = layers;
          v.assoc.lift_active = lift;
          const auto x = test::score_recall(m.value()->config(), rows, v);
          std::printf("  sweep id weight %.2f layers %d lift %2d: recall@1 %.3f @3 %.3f  "
                      "cos own %.3f other %.3f\n",
                      double(w), layers, lift, x.recall_at1, x.recall_at3, x.mean_true_cos,
                      x.mean_best_other_cos);
        }
      }
    }
  }

  // Scoring cost: association + dual score over n keys of this geometry, one core.
  memory::Association a(su.assoc, {64}, {32});
  const size_t KF = a.key_floats();
  memory::ScoreRule rule;
  for (int n : {64, 1000, 10000}) {
    std::vector<float> keys(size_t(n) * KF), q(a.query_floats());
    for (size_t i = 0; i < keys.size(); ++i) keys[i] = float((i * 2654435761u) % 1000) * 1e-3f;
    for (size_t i = 0; i < q.size(); ++i) q[i] = float(i % 7) * 0.1f;
    double best_ms = 1e9, sink = 0;
    for (int rep = 0; rep < 20; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      double best = -1e9;
      for (int e = 0; e < n; ++e) {
        const double s = rule.score(a.association(q.data(), keys.data() + size_t(e) * KF), 1.0f,
                                    e, 1000000);
        best = std::max(best, s);
      }
      sink += best;
      best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(
                                      std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("  scoring %5d keys of %zu floats: %.3f ms (best of 20)%s\n", n, KF, best_ms,
                sink == 12345 ? " " : "");
  }
  return 0;
}
