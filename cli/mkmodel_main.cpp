// mkmodel: writes a random-weight Gemma 4 checkpoint with the real tensor names and shapes from a
// config.json (configs/*.json), for benchmarks and tests without downloading weights.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>

#include "cli/version.h"
#include "model/config.h"
#include "model/synth/synth_model.h"
#include "model/thread_pool.h"
#include "model/tokenizer/tokenizer.h"

namespace {

constexpr const char* kUsage =
    "usage: mkmodel --config CONFIG.json --out DIR [--seed N] [--dtype bf16|f16|f32]\n"
    "               [--shard-gb G] [--threads N] [--tokenizer FILE]\n"
    "       mkmodel --version\n"
    "Writes DIR/config.json, generation_config.json and model.safetensors (or shards of at most\n"
    "G GB plus model.safetensors.index.json) with deterministic random weights.\n"
    "--tokenizer FILE copies a tokenizer.json in, after checking that it parses and that its\n"
    "text vocabulary fits the config's vocab_size; without it DIR has no tokenizer, and infer\n"
    "runs it only from --prompt-ids (with --output ids).\n";

struct Args {
  std::string config;
  std::string out;
  uint64_t seed = 0;
  infer::DType dtype = infer::DType::kBF16;
  double shard_gb = 0.0;
  int threads = 0;  // 0: all hardware threads
  std::string tokenizer;  // --tokenizer FILE: copied to DIR/tokenizer.json; empty: none
};

[[noreturn]] void fail(const std::string& message, int status = 2) {
  std::fprintf(stderr, "mkmodel: %s\n", message.c_str());
  std::exit(status);
}

template <class T>
T parse_number(std::string_view flag, std::string_view text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    fail(std::string(flag) + " expects a number, got '" + std::string(text) + "'");
  }
  return value;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (flag == "--version") {
      std::printf("mkmodel %s\n", infer::cli::version_string().c_str());
      std::exit(0);
    }
    if (i + 1 >= argc)
      fail("unknown option or missing value: '" + std::string(flag) + "' (see --help)");
    const std::string_view value = argv[++i];
    if (flag == "--config") {
      a.config = value;
    } else if (flag == "--tokenizer") {
      a.tokenizer = value;
    } else if (flag == "--out") {
      a.out = value;
    } else if (flag == "--seed") {
      a.seed = parse_number<uint64_t>(flag, value);
    } else if (flag == "--dtype") {
      if (value == "bf16") {
        a.dtype = infer::DType::kBF16;
      } else if (value == "f16") {
        a.dtype = infer::DType::kF16;
      } else if (value == "f32") {
        a.dtype = infer::DType::kF32;
      } else {
        fail("--dtype must be bf16, f16 or f32, got '" + std::string(value) + "'");
      }
    } else if (flag == "--shard-gb") {
      a.shard_gb = parse_number<double>(flag, value);
      if (!(a.shard_gb > 0.0))
        fail("--shard-gb must be positive, got '" + std::string(value) + "'");
    } else if (flag == "--threads") {
      a.threads = parse_number<int>(flag, value);
      if (a.threads < 1 || a.threads > 1024)
        fail("--threads must be 1..1024, got " + std::string(value));
    } else {
      fail("unknown option '" + std::string(flag) + "' (see --help)");
    }
  }
  if (a.config.empty()) fail("--config CONFIG.json is required (see --help)");
  if (a.out.empty()) fail("--out DIR is required (see --help)");
  return a;
}

double gb(uint64_t bytes) { return static_cast<double>(bytes) / 1e9; }

// --tokenizer: the file must parse and fit the config's vocabulary, checked before any weight is
// generated (runtime errors: exit 1).
void check_tokenizer(const Args& a) {
  std::ifstream in(a.config, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) fail("cannot read " + a.config, 1);
  const infer::Result<infer::ModelConfig> cfg = infer::parse_config(text.str(), a.config);
  if (!cfg.ok()) fail(cfg.error().message, 1);
  const infer::Result<infer::Tokenizer> tok = infer::Tokenizer::load(a.tokenizer);
  if (!tok.ok()) fail("--tokenizer: " + tok.error().message, 1);
  const infer::Result<void> fits = tok->check_fits(cfg->text.vocab_size, a.tokenizer);
  if (!fits.ok()) fail(fits.error().message, 1);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  if (!args.tokenizer.empty()) check_tokenizer(args);
  const int threads = args.threads > 0
                          ? args.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  infer::ThreadPool pool(threads);

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto last = start;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  int last_decile = -1;
  auto report = [&](const infer::SynthProgress& p) {
    const auto now = Clock::now();
    const double s = std::chrono::duration<double>(now - start).count();
    const int pct = p.bytes_total ? static_cast<int>(100 * p.bytes_done / p.bytes_total) : 100;
    if (tty ? now - last < std::chrono::milliseconds(250) && p.bytes_done < p.bytes_total
            : pct / 10 == last_decile) {
      return;
    }
    last = now;
    last_decile = pct / 10;
    std::fprintf(stderr, "%smkmodel: %.2f / %.2f GB (%d%%), %zu / %zu tensors, %.1f s%s",
                 tty ? "\r" : "", gb(p.bytes_done), gb(p.bytes_total), pct, p.tensors_done,
                 p.tensors_total, s, tty ? "" : "\n");
  };

  const auto shard_bytes = static_cast<size_t>(args.shard_gb * 1e9);
  infer::Result<void> r = infer::write_random_checkpoint(args.config, args.out, args.seed,
                                                         args.dtype, pool, shard_bytes, report);
  if (tty) std::fputc('\n', stderr);
  if (!r.ok()) {
    std::fprintf(stderr, "mkmodel: %s: %s\n", infer::error_code_name(r.error().code),
                 r.error().message.c_str());
    return 1;
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  std::fprintf(stderr, "mkmodel: wrote %s in %.1f s with %d threads\n", args.out.c_str(), s,
               threads);
  if (args.tokenizer.empty()) {
    std::fprintf(stderr,
                 "mkmodel: %s has no tokenizer.json: infer runs it only from --prompt-ids "
                 "(with --output ids); give --tokenizer FILE for text\n",
                 args.out.c_str());
    return 0;
  }
  std::error_code ec;
  std::filesystem::copy_file(args.tokenizer, std::filesystem::path(args.out) / "tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) fail("cannot copy " + args.tokenizer + " into " + args.out + ": " + ec.message(), 1);
  return 0;
}
