// What the episode store's tests share (store_test.cpp, store_damage_test.cpp,
// store_crash_test.cpp): a small geometry, episodes whose every byte follows from their id, and a
// fixture with a fresh directory per test.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "memory/episode_store.h"
#include "test/memory/temp_dir.h"

namespace infer::memory {

class StoreTest : public test::TempDirTest {};

// Capacity 8, 16 tokens, a 4-float key, 64 payload bytes, room for 100 codebook bytes.
StoreGeometry small_geometry();
// Everything an episode holds follows from its id, so a reader can check it byte for byte.
Episode make_episode(uint64_t id, const StoreGeometry& g);
::testing::AssertionResult same_content(const Episode& got, uint64_t id, const StoreGeometry& g);
// Opens or creates; a failure is a test failure and null.
std::unique_ptr<EpisodeStore> must_open(const std::string& p, const StoreGeometry& g);

std::vector<uint8_t> read_bytes(const std::string& p);
void write_bytes(const std::string& p, const std::vector<uint8_t>& b);

}  // namespace infer::memory
