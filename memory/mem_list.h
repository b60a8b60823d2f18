// --mem-list: prints the episodes of a store file (opened read-only) and its problems.
#pragma once

#include <cstdio>
#include <string>

#include "base/result.h"

namespace infer::memory {

// One line per episode (id, positions, tokens, strength, written/recalled times, recalls,
// preview), then one "problem:" line each. An unreadable file is the Error (one line).
Result<void> print_mem_list(const std::string& path, std::FILE* out);

}  // namespace infer::memory
