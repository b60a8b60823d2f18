// Helpers for the PTY tests: open a PtySet on a temporary ROOT and wait, bounded, for text.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test/tools_vfs/temp_tree.h"
#include "tools_vfs/pty_set.h"

namespace infer::tools::test {

using namespace std::chrono_literals;

inline std::unique_ptr<PtySet> make_pty_set(const TempTree& tree, PtyLimits limits = {},
                                            PtyEventCallback on_event = {}) {
  auto set = PtySet::create(tree.base(), std::move(limits), std::move(on_event));
  EXPECT_TRUE(set.ok()) << (set.ok() ? "" : set.error().message);
  return set.ok() ? std::move(set).value() : nullptr;
}

inline PtyId open_pty(PtySet& set, std::vector<std::string> argv, uint16_t rows = 24,
                      uint16_t cols = 80) {
  PtyOpenRequest req;
  req.argv = std::move(argv);
  req.rows = rows;
  req.cols = cols;
  auto id = set.open(req);
  EXPECT_TRUE(id.ok()) << (id.ok() ? "" : id.error().message);
  return id.ok() ? *id : 0;
}

// The raw output from 0 once it holds NEEDLE, or all of it after TIMEOUT (the test then fails).
inline std::string wait_raw(PtySet& set, PtyId id, const std::string& needle,
                            std::chrono::milliseconds timeout = 5000ms) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string all;
  uint64_t next = 0;
  for (;;) {
    auto r = set.read_raw(id, next, size_t(1) << 20);
    if (!r.ok()) {
      ADD_FAILURE() << r.error().message;
      return all;
    }
    all += r->bytes;
    next = r->next;
    if (all.find(needle) != std::string::npos) return all;
    if (std::chrono::steady_clock::now() >= deadline) {
      ADD_FAILURE() << "no \"" << needle << "\" after " << timeout.count() << " ms in: " << all;
      return all;
    }
    (void)set.wait_output(id, next, 50ms);
  }
}

// Waits until PTY ID's program has ended; its status.
inline PtyStatus wait_exit(PtySet& set, PtyId id, std::chrono::milliseconds timeout = 5000ms) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto s = set.status(id);
    if (!s.ok()) {
      ADD_FAILURE() << s.error().message;
      return {};
    }
    if (!s->running) return *s;
    if (std::chrono::steady_clock::now() >= deadline) {
      ADD_FAILURE() << "PTY " << id << " still running after " << timeout.count() << " ms";
      return *s;
    }
    (void)set.wait_output(id, UINT64_MAX - 1, 20ms);  // returns early when it exits
  }
}

}  // namespace infer::tools::test
