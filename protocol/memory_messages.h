// The episodic memory frames' payloads (docs/PROTOCOL.md §4.14-§4.18) as plain structs; part of
// the ClientMessage and ServerMessage variants (protocol/messages.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/opcodes.h"

namespace infer::protocol {

// ---- client → server

struct MemoryRecall {  // whole payload: the query text (UTF-8)
  static constexpr Opcode kOpcode = Opcode::kMemoryRecall;
  std::string text;
  bool operator==(const MemoryRecall&) const = default;
};

struct MemoryStore {  // empty
  static constexpr Opcode kOpcode = Opcode::kMemoryStore;
  bool operator==(const MemoryStore&) const = default;
};

struct MemoryForget {  // u64 episode id
  static constexpr Opcode kOpcode = Opcode::kMemoryForget;
  uint64_t episode_id = 0;
  bool operator==(const MemoryForget&) const = default;
};

struct MemoryQuery {  // u32 first, u32 max_count (<= kMaxListEpisodes)
  static constexpr Opcode kOpcode = Opcode::kMemoryQuery;
  uint32_t first = 0;
  uint32_t max_count = 0;
  bool operator==(const MemoryQuery&) const = default;
};

struct MemoryWatch {  // u32 on: 0 or 1
  static constexpr Opcode kOpcode = Opcode::kMemoryWatch;
  uint32_t on = 0;
  bool operator==(const MemoryWatch&) const = default;
};

// ---- server → client

struct RecalledEpisode {  // 28 bytes
  uint64_t episode_id = 0;
  uint32_t n_tokens = 0;
  float score = 0.0f;
  float association = 0.0f;
  float strength = 0.0f;  // after this recall
  uint32_t age_s = 0;     // since it was written
  bool operator==(const RecalledEpisode&) const = default;
};
struct MemoryRecalled {  // u32 n, then n × 28
  static constexpr Opcode kOpcode = Opcode::kMemoryRecalled;
  std::vector<RecalledEpisode> episodes;  // best first
  bool operator==(const MemoryRecalled&) const = default;
};

struct StoredEpisode {  // 20 bytes
  uint64_t episode_id = 0;
  uint64_t pos0 = 0;
  uint32_t n_tokens = 0;
  bool operator==(const StoredEpisode&) const = default;
};
struct MemoryStored {  // u32 n, then n × 20
  static constexpr Opcode kOpcode = Opcode::kMemoryStored;
  std::vector<StoredEpisode> episodes;
  bool operator==(const MemoryStored&) const = default;
};

struct MemoryForgotten {  // u64 episode id
  static constexpr Opcode kOpcode = Opcode::kMemoryForgotten;
  uint64_t episode_id = 0;
  bool operator==(const MemoryForgotten&) const = default;
};

struct ListedEpisode {  // 44 bytes + preview
  uint64_t episode_id = 0;
  uint64_t pos0 = 0;
  uint32_t n_tokens = 0;
  float strength = 0.0f;  // decayed to now
  uint64_t written_ms = 0;
  uint64_t recalled_ms = 0;  // 0: never
  std::string preview;       // UTF-8, <= kMaxPreviewBytes
  bool operator==(const ListedEpisode&) const = default;
};
struct MemoryList {  // u32 total, u32 n, then n entries
  static constexpr Opcode kOpcode = Opcode::kMemoryList;
  uint32_t total = 0;
  std::vector<ListedEpisode> episodes;
  bool operator==(const MemoryList&) const = default;
};

struct MemoryEvent {  // 36 bytes
  static constexpr Opcode kOpcode = Opcode::kMemoryEvent;
  MemoryEventKind kind = MemoryEventKind::kStored;
  uint64_t episode_id = 0;
  uint64_t pos0 = 0;
  uint32_t n_tokens = 0;
  float score = 0.0f;        // recalled; else 0
  float association = 0.0f;  // recalled; else 0
  float strength = 0.0f;
  bool operator==(const MemoryEvent&) const = default;
};

struct MemoryWatchAck {  // empty
  static constexpr Opcode kOpcode = Opcode::kMemoryWatchAck;
  bool operator==(const MemoryWatchAck&) const = default;
};

}  // namespace infer::protocol
