// libFuzzer target: arbitrary bytes written to a file and opened as an episode store, read-only
// and then for writing. Anything but a clean Result (a crash, a sanitizer report, a leak) is a
// bug; an accepted store must list, read and take one more commit that a reopen sees.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "memory/episode_store.h"

namespace {

std::string fuzz_path() {
  return "/tmp/episode_store_fuzz_" + std::to_string(getpid()) + ".bin";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace infer::memory;
  const std::string path = fuzz_path();
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  StoreGeometry g;
  {
    auto r = EpisodeStore::open_read_only(path);
    if (!r.ok()) {
      if (r.error().message.find('\n') != std::string::npos) __builtin_trap();
      unlink(path.c_str());
      return 0;
    }
    auto& s = *r;
    g = s->geometry();
    for (const EpisodeInfo& info : s->list()) {
      auto e = s->read(info.id);
      if (!e.ok() || e->ids.size() != info.n_tokens || info.n_tokens > g.episode_tokens ||
          e->key.size() != g.key_floats || e->payload.size() != g.payload_bytes ||
          info.preview.size() > kPreviewBytes) {
        __builtin_trap();
      }
    }
    size_t keys = 0;
    s->for_each_key([&](const EpisodeInfo&, std::span<const float> key) {
      if (key.size() != g.key_floats) __builtin_trap();
      ++keys;
    });
    if (keys != s->size() || s->size() > g.capacity) __builtin_trap();
    if (s->codebooks().size() > g.codebook_bytes) __builtin_trap();
  }
  {
    auto r = EpisodeStore::open(path, g);
    if (!r.ok()) __builtin_trap();  // read-only accepted it with this geometry
    auto& s = *r;
    Episode e;
    e.ids.assign(g.episode_tokens, 7);
    e.info.n_tokens = g.episode_tokens;
    e.key.assign(g.key_floats, 0.5f);
    e.payload.assign(g.payload_bytes, 3);
    e.info.preview = "fuzz";
    const auto l = s->list();
    const uint64_t victim = l.size() >= g.capacity ? l.front().id : 0;
    auto id = s->append(e, victim);
    if (!id.ok()) __builtin_trap();
    s.reset();
    auto again = EpisodeStore::open(path, g);
    if (!again.ok() || !(*again)->read(*id).ok()) __builtin_trap();
  }
  unlink(path.c_str());
  return 0;
}
