// srvq_curve: the compression curve of SrvqCodec (memory/srvq.h) on real KV rows. Runs random
// token ids through the CPU forward pass in ring mode, reads the pre-RoPE K and V rows of the
// tiered layers (KvRingAccess::read_kv), trains one codec per layer and K/V on the first tokens
// and, on held-out tokens, prints one JSON line per setting: bits per element, relative L2 error
// of the rows, relative L2 error of attention outputs over the coded rows, encode/decode ns/row.
//
//   srvq_curve --model DIR | --config CONFIG.json [--tokens N] [--quant q8|q4] [--layers N]
//              [--threads N] [--sub 16,32,64] [--bits 4,5,6,7,8] [--stages 8]
//              [--iterations 12] [--spherical 1]   (leading stages learned on the sphere)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memory/srvq.h"
#include "model/cpu_forward.h"
#include "model/kv_ring_api.h"
#include "model/model.h"
#include "model/thread_pool.h"

namespace infer {
namespace {

struct Args {
  std::string model_dir, config;
  int64_t tokens = 768;
  Quant quant = Quant::kAsStored;
  int layers = 2;  // tiered layers measured (spread over the stack)
  int threads = 2;
  std::vector<int> subs = {16, 32, 64}, bits = {4, 5, 6, 7, 8};
  int stages = 8;
  int iterations = 12;
  int spherical_stages = 1;
};

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  return out;
}

double rel_l2(const float* a, const float* b, size_t n) {
  double e = 0, s = 0;
  for (size_t i = 0; i < n; ++i) {
    e += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    s += double(a[i]) * a[i];
  }
  return s > 0 ? std::sqrt(e / s) : 0.0;
}

// softmax(scale q.K^T) V for each query of q [nq, d] over keys k, v [nk, d]: out [nq, d].
void attend(const float* q, size_t nq, const float* k, const float* v, size_t nk, int d,
            double scale, std::vector<double>& out) {
  out.assign(nq * d, 0.0);
  std::vector<double> s(nk);
  for (size_t i = 0; i < nq; ++i) {
    double mx = -1e300;
    for (size_t j = 0; j < nk; ++j) {
      double dot = 0;
      for (int t = 0; t < d; ++t) dot += double(q[i * d + t]) * k[j * d + t];
      s[j] = dot * scale;
      mx = std::max(mx, s[j]);
    }
    double z = 0;
    for (size_t j = 0; j < nk; ++j) z += (s[j] = std::exp(s[j] - mx));
    for (size_t j = 0; j < nk; ++j)
      for (int t = 0; t < d; ++t) out[i * d + t] += s[j] / z * v[j * d + t];
  }
}

double rel_l2d(const std::vector<double>& a, const std::vector<double>& b) {
  double e = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    e += (a[i] - b[i]) * (a[i] - b[i]);
    s += a[i] * a[i];
  }
  return s > 0 ? std::sqrt(e / s) : 0.0;
}

// The first `stages` stages of a trained codec: its blob's centroids are [stages][K][sub_dim],
// so a prefix is the codec trained with fewer stages (training is stage by stage, same seed).
memory::SrvqCodec truncate(const memory::SrvqCodec& c, int stages) {
  auto blob = c.serialize();
  const auto& cfg = c.config();
  const size_t keep = 36 + size_t(stages) * (size_t{1} << cfg.code_bits) * cfg.sub_dim * 4;
  blob.resize(keep);
  for (int i = 0; i < 4; ++i) blob[16 + i] = uint8_t(uint32_t(stages) >> (8 * i));
  uint64_t h = 0xcbf29ce484222325ull;  // the blob's FNV-1a 64 checksum (memory/srvq.cpp)
  for (uint8_t b : blob) h = (h ^ b) * 0x100000001b3ull;
  for (int i = 0; i < 8; ++i) blob.push_back(uint8_t(h >> (8 * i)));
  auto r = memory::SrvqCodec::deserialize(blob);
  if (!r.ok()) {
    std::fprintf(stderr, "truncate: %s\n", r.error().message.c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

struct Coded {
  std::vector<float> rows;  // decoded [n, d]
  double encode_ns = 0, decode_ns = 0;
};

Coded round_trip(const memory::SrvqCodec& c, const std::vector<float>& rows) {
  const int d = c.config().dim;
  const size_t n = rows.size() / d;
  std::vector<uint8_t> codes(n * c.row_bytes());
  Coded out;
  out.rows.resize(rows.size());
  auto t0 = std::chrono::steady_clock::now();
  for (size_t r = 0; r < n; ++r) c.encode(&rows[r * d], &codes[r * c.row_bytes()]);
  auto t1 = std::chrono::steady_clock::now();
  for (size_t r = 0; r < n; ++r) c.decode(&codes[r * c.row_bytes()], &out.rows[r * d]);
  auto t2 = std::chrono::steady_clock::now();
  out.encode_ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / double(n);
  out.decode_ns = std::chrono::duration<double, std::nano>(t2 - t1).count() / double(n);
  return out;
}

int run(const Args& a) {
  ThreadPool pool(a.threads);
  const LoadOptions opts{a.quant, EmbedScale::kTableDtype};
  Result<std::unique_ptr<Model>> m = make_error(ErrorCode::kInvalidArgument, "no model");
  std::string name;
  if (!a.config.empty()) {
    std::ifstream f(a.config);
    std::stringstream ss;
    ss << f.rdbuf();
    m = Model::random(ss.str(), 1, DType::kBF16, opts, pool);
    name = a.config;
  } else {
    m = Model::load(a.model_dir, opts, pool);
    name = a.model_dir;
  }
  if (!m.ok()) {
    std::fprintf(stderr, "srvq_curve: %s\n", m.error().message.c_str());
    return 1;
  }
  const Model& model = **m;
  const int64_t N = a.tokens;
  RingConfig ring;
  ring.anchors = 4;
  ring.window = N;
  ring.recall = 16;
  CpuForward fwd(model, pool, ring, 64);
  std::vector<int32_t> ids(static_cast<size_t>(N));
  uint64_t s = 42;
  const int64_t V = fwd.vocab_size();
  for (auto& id : ids) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    id = int32_t(4 + (s >> 33) % uint64_t(V - 4));
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits(static_cast<size_t>(V));
  if (auto r = fwd.prefill(ids, logits.data()); !r.ok()) {
    std::fprintf(stderr, "srvq_curve: prefill: %s\n", r.error().message.c_str());
    return 1;
  }
  KvBlock block;
  if (auto r = fwd.read_kv(0, N, &block); !r.ok()) {
    std::fprintf(stderr, "srvq_curve: read_kv: %s\n", r.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "prefill of %lld tokens: %.1f s; tiered layers %zu\n", (long long)N,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
               block.layers.size());

  // Training on the first 3/4 of the tokens, measuring on the rest; queries: K rows of the
  // held-out tokens' first half (proxies for the model's queries), keys/values: the second half.
  const int64_t n_train = N * 3 / 4, n_held = N - n_train, n_q = n_held / 2;
  std::vector<size_t> picks;
  const size_t L = block.layers.size();
  for (int i = 0; i < a.layers && i < int(L); ++i)
    picks.push_back(a.layers == 1 ? 0 : size_t(i) * (L - 1) / size_t(std::max(1, a.layers - 1)));
  for (size_t li : picks) {
    const int layer = block.layers[li];
    const LayerPlan& plan = model.config().layers[size_t(layer)];
    const int d = plan.head_dim, n_kv = plan.num_key_value_heads;
    for (int h = 0; h < std::min(n_kv, 1); ++h) {  // the first KV head of each layer
      // Each token's head-h row: [N, d].
      auto head = [&](const std::vector<float>& kv) {
        std::vector<float> out(size_t(N) * d);
        for (int64_t t = 0; t < N; ++t)
          std::memcpy(&out[size_t(t) * d], &kv[(size_t(t) * n_kv + h) * d], sizeof(float) * d);
        return out;
      };
      const std::vector<float> K = head(block.k[li]), Vr = head(block.v[li]);
      const std::vector<float> k_train(K.begin(), K.begin() + n_train * d),
          v_train(Vr.begin(), Vr.begin() + n_train * d),
          k_held(K.begin() + n_train * d, K.end()), v_held(Vr.begin() + n_train * d, Vr.end());
      const float* q = k_held.data();
      const size_t nk = size_t(n_held - n_q);
      const float* k_keys = k_held.data() + n_q * d;
      const float* v_keys = v_held.data() + n_q * d;
      // The model attends with scale 1 (q, k normed: GEMMA4_TEXT.md §4.5); 1/sqrt(d) is the
      // softer proxy (K rows standing in for queries are not the model's queries).
      std::vector<double> ref1, refs;
      attend(q, size_t(n_q), k_keys, v_keys, nk, d, 1.0, ref1);
      attend(q, size_t(n_q), k_keys, v_keys, nk, d, 1.0 / std::sqrt(double(d)), refs);
      for (int sub : a.subs) {
        if (d % sub != 0) continue;
        for (int bits : a.bits) {
          memory::SrvqConfig cfg;
          cfg.dim = d;
          cfg.sub_dim = sub;
          cfg.stages = a.stages;
          cfg.code_bits = bits;
          cfg.iterations = a.iterations;
          cfg.spherical_stages = a.spherical_stages;
          auto tt = std::chrono::steady_clock::now();
          auto kc = memory::SrvqCodec::train(cfg, k_train);
          auto vc = memory::SrvqCodec::train(cfg, v_train);
          const double train_s =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - tt).count();
          if (!kc.ok() || !vc.ok()) {
            std::fprintf(stderr, "train: %s\n", (!kc.ok() ? kc : vc).error().message.c_str());
            return 1;
          }
          for (int st = 1; st <= a.stages; ++st) {
            const auto kt = truncate(*kc, st), vt = truncate(*vc, st);
            const Coded kd = round_trip(kt, k_held), vd = round_trip(vt, v_held);
            std::vector<double> out1, outs;
            attend(q, size_t(n_q), kd.rows.data() + n_q * d, vd.rows.data() + n_q * d, nk, d,
                   1.0, out1);
            attend(q, size_t(n_q), kd.rows.data() + n_q * d, vd.rows.data() + n_q * d, nk, d,
                   1.0 / std::sqrt(double(d)), outs);
            nlohmann::json j = {{"model", name},
                                {"layer", layer},
                                {"head", h},
                                {"dim", d},
                                {"sub_dim", sub},
                                {"code_bits", bits},
                                {"stages", st},
                                {"spherical_stages", a.spherical_stages},
                                {"bits_per_element", kt.bits_per_element()},
                                {"k_err", rel_l2(k_held.data(), kd.rows.data(), k_held.size())},
                                {"v_err", rel_l2(v_held.data(), vd.rows.data(), v_held.size())},
                                {"attn_err", rel_l2d(ref1, out1)},
                                {"attn_err_sqrt_d", rel_l2d(refs, outs)},
                                {"encode_ns", (kd.encode_ns + vd.encode_ns) / 2},
                                {"decode_ns", (kd.decode_ns + vd.decode_ns) / 2},
                                {"train_s_kv", train_s},
                                {"n_train", n_train},
                                {"n_held", n_held}};
            std::printf("%s\n", j.dump().c_str());
            std::fflush(stdout);
          }
        }
      }
    }
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
        std::fprintf(stderr, "srvq_curve: %s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--model") a.model_dir = next();
    else if (k == "--config") a.config = next();
    else if (k == "--tokens") a.tokens = std::stoll(next());
    else if (k == "--layers") a.layers = std::stoi(next());
    else if (k == "--threads") a.threads = std::stoi(next());
    else if (k == "--stages") a.stages = std::stoi(next());
    else if (k == "--iterations") a.iterations = std::stoi(next());
    else if (k == "--spherical") a.spherical_stages = std::stoi(next());
    else if (k == "--sub") a.subs = infer::parse_list(next());
    else if (k == "--bits") a.bits = infer::parse_list(next());
    else if (k == "--quant") {
      const std::string q = next();
      a.quant = q == "q8" ? infer::Quant::kQ8_0 : q == "q4" ? infer::Quant::kQ4_0 : infer::Quant::kAsStored;
    } else {
      std::fprintf(stderr, "usage: srvq_curve --model DIR | --config CONFIG.json [--tokens N] "
                           "[--quant q8|q4] [--layers N] [--threads N] [--sub 16,32,64] "
                           "[--bits 4,5,6,7,8] [--stages 8] [--iterations 12] [--spherical 1]\n");
      return 2;
    }
  }
  if (a.model_dir.empty() == a.config.empty()) {
    std::fprintf(stderr, "srvq_curve: give --model DIR or --config CONFIG.json\n");
    return 2;
  }
  return infer::run(a);
}
