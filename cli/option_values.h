// Value parsers for command-line switches: whole-string numbers within a range and id lists.
// Errors read "<switch>: expected <what>, got '<text>'".
#pragma once

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace infer::cli {

inline Error bad(std::string message) {
  return make_error(ErrorCode::kInvalidArgument, std::move(message));
}

// "a number 0 to 1", "a number 0 or more" (hi == unbounded); %g is fine for real bounds.
std::string expected(const char* what, double lo, double hi, double unbounded);

// "an integer 1 to 16777216", "an integer 0 or more": integers printed whole, never as 1.67772e+07.
template <class T>
std::string expected_integer(T lo, T hi) {
  std::string s = "an integer " + std::to_string(lo);
  return hi == std::numeric_limits<T>::max() ? s + " or more" : s + " to " + std::to_string(hi);
}

template <class T>
Result<T> parse_int(std::string_view name, std::string_view text, T lo, T hi) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) {
    return bad(std::string(name) + ": expected " + expected_integer(lo, hi) + ", got '" +
               std::string(text) + "'");
  }
  return v;
}

// A finite float in [lo, hi].
Result<float> parse_float(std::string_view name, std::string_view text, float lo, float hi);

// "2,17,99" (spaces allowed around the commas): non-negative ids.
Result<std::vector<int32_t>> parse_ids(std::string_view name, std::string_view text);

}  // namespace infer::cli
