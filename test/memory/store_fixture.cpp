// The episode store tests' shared helpers (store_fixture.h).
#include "test/memory/store_fixture.h"

#include <fstream>
#include <iterator>

namespace infer::memory {

StoreGeometry small_geometry() {
  StoreGeometry g;
  g.model_fingerprint = 0x1234abcd5678ef00ull;
  g.capacity = 8;
  g.episode_tokens = 16;
  g.key_floats = 4;
  g.payload_bytes = 64;
  g.codebook_bytes = 100;
  return g;
}

Episode make_episode(uint64_t id, const StoreGeometry& g) {
  Episode e;
  e.info.pos0 = int64_t(id) * 100;
  e.info.written_ms = 1'700'000'000'000 + int64_t(id);
  e.info.preview = "episode " + std::to_string(id) + " \xc3\xa9";
  const uint32_t n = 1 + uint32_t(id % g.episode_tokens);
  for (uint32_t i = 0; i < n; ++i) e.ids.push_back(int32_t(id * 1000 + i));
  for (uint32_t k = 0; k < g.key_floats; ++k) e.key.push_back(float(id) + 0.5f * float(k));
  for (uint32_t b = 0; b < g.payload_bytes; ++b) e.payload.push_back(uint8_t(id * 31 + b * 7));
  e.info.n_tokens = n;
  return e;
}

::testing::AssertionResult same_content(const Episode& got, uint64_t id, const StoreGeometry& g) {
  const Episode want = make_episode(id, g);
  if (got.info.id != id) return ::testing::AssertionFailure() << "id " << got.info.id;
  if (got.info.pos0 != want.info.pos0 || got.info.n_tokens != want.info.n_tokens ||
      got.info.written_ms != want.info.written_ms || got.info.preview != want.info.preview ||
      got.ids != want.ids || got.key != want.key || got.payload != want.payload) {
    return ::testing::AssertionFailure() << "episode " << id << " differs";
  }
  return ::testing::AssertionSuccess();
}

std::unique_ptr<EpisodeStore> must_open(const std::string& p, const StoreGeometry& g) {
  auto s = EpisodeStore::open(p, g);
  if (!s.ok()) {
    ADD_FAILURE() << s.error().message;
    return nullptr;
  }
  return std::move(s).value();
}

std::vector<uint8_t> read_bytes(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}
void write_bytes(const std::string& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

}  // namespace infer::memory
