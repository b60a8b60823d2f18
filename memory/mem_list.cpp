// --mem-list: the episodes of a store file, one line each, from EpisodeStore::open_read_only.
#include "memory/mem_list.h"

#include <ctime>
#include <memory>

#include "memory/episode_store.h"

namespace infer::memory {
namespace {

// UTC "2026-12-05 17:10:03", or "never" for 0.
std::string format_ms(int64_t ms) {
  if (ms == 0) return "never";
  const std::time_t t = std::time_t(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// The preview on one line: control characters become spaces.
std::string one_line(std::string s) {
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return s;
}

}  // namespace

Result<void> print_mem_list(const std::string& path, std::FILE* out) {
  INFER_TRY(auto store, EpisodeStore::open_read_only(path));
  const StoreGeometry& g = store->geometry();
  std::fprintf(out, "%s: %zu of %u episodes, %u tokens each, key %u floats, payload %u bytes\n",
               path.c_str(), store->size(), g.capacity, g.episode_tokens, g.key_floats,
               g.payload_bytes);
  for (const EpisodeInfo& e : store->list()) {
    std::fprintf(out,
                 "%llu  pos %lld..%lld  %u tokens  strength %.3f  written %s  recalled %s (%u)  "
                 "\"%s\"\n",
                 static_cast<unsigned long long>(e.id), static_cast<long long>(e.pos0),
                 static_cast<long long>(e.pos0 + e.n_tokens), e.n_tokens, double(e.strength),
                 format_ms(e.written_ms).c_str(), format_ms(e.recalled_ms).c_str(), e.recalls,
                 one_line(e.preview).c_str());
  }
  for (const std::string& p : store->problems()) std::fprintf(out, "problem: %s\n", p.c_str());
  return Ok{};
}

}  // namespace infer::memory
