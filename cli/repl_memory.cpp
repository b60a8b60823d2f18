// /memory, /remember, /forget N (cli/repl_memory.h).
#include "cli/repl_memory.h"

#include <cstdio>
#include <string>

namespace infer::cli {
namespace {

void print_hit(const actors::MemoryEntry& e) {
  std::printf("  #%llu  pos %lld-%lld  score %.3f  association %.3f  strength %.2f\n",
              (unsigned long long)e.id, (long long)e.pos0,
              (long long)(e.pos0 + int64_t(e.n_tokens) - 1), e.score, double(e.association),
              double(e.strength));
}

}  // namespace

bool run_memory_command(const ReplInput& in, bool memory_on, actors::Pipeline& pipeline,
                        ConsoleFrontEnd& front) {
  std::fflush(stdout);
  if (!memory_on) {
    std::printf("episodic memory is off: start infer with --memory [PATH] (the KV ring, the "
                "default, is needed)\n");
    std::fflush(stdout);
    return true;
  }
  static uint64_t tickets = 0;
  actors::MemoryOp op;
  op.ticket = ++tickets;
  if (in.command == Command::kMemory) {
    op.kind = actors::MemoryOpKind::kQuery;  // max_count 0: the summary and the last recall
  } else if (in.command == Command::kRemember) {
    op.kind = actors::MemoryOpKind::kStore;
  } else {
    op.kind = actors::MemoryOpKind::kForget;
    op.episode_id = std::stoull(in.text);
  }
  pipeline.memory(op);
  const actors::MemoryReply r = front.wait_memory(op.ticket);
  if (!r.ok) {
    std::fprintf(stderr, "infer: memory: %s\n", r.error.c_str());
    return false;
  }
  switch (op.kind) {
    case actors::MemoryOpKind::kQuery:
      std::printf("memory: %llu of %llu episodes in %s\n", (unsigned long long)r.total,
                  (unsigned long long)r.capacity, r.path.c_str());
      if (r.last_hits.empty()) {
        std::printf("last recall: none\n");
      } else {
        std::printf("last recall: %zu episode(s), best first\n", r.last_hits.size());
        for (const actors::MemoryEntry& e : r.last_hits) print_hit(e);
      }
      break;
    case actors::MemoryOpKind::kStore:
      if (r.entries.empty()) std::printf("remembered nothing new (every token is stored)\n");
      for (const actors::MemoryEntry& e : r.entries) {
        std::printf("remembered #%llu: pos %lld-%lld, %u tokens\n", (unsigned long long)e.id,
                    (long long)e.pos0, (long long)(e.pos0 + int64_t(e.n_tokens) - 1),
                    e.n_tokens);
      }
      break;
    default:
      std::printf("forgot #%llu\n", (unsigned long long)op.episode_id);
      break;
  }
  std::fflush(stdout);
  return true;
}

}  // namespace infer::cli
