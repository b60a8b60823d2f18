// The switch table behind parse_options (options.cpp): each switch's name, its value and the
// function that applies it to Options. Internal to cli/.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "base/result.h"
#include "cli/options.h"

namespace infer::cli {

enum class Arg { kNone, kRequired, kOptional };
using Value = std::optional<std::string_view>;
using Apply = Result<void> (*)(Options&, std::string_view name, Value value);

struct Switch {
  std::string_view name;  // "--model"
  char short_name;        // 'm', or 0
  Arg arg;
  Apply apply;
};

// Every switch, in --help's order of kinds.
std::span<const Switch> switches();

}  // namespace infer::cli
