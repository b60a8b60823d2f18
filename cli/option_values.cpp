// Number and id-list parsing for switches, with messages that name the switch and the range.
#include "cli/option_values.h"

#include <cmath>
#include <cstdio>

namespace infer::cli {

std::string expected(const char* what, double lo, double hi, double unbounded) {
  char buf[96];
  if (hi == unbounded)
    std::snprintf(buf, sizeof buf, "%s %g or more", what, lo);
  else
    std::snprintf(buf, sizeof buf, "%s %g to %g", what, lo, hi);
  return buf;
}

Result<float> parse_float(std::string_view name, std::string_view text, float lo, float hi) {
  float v = 0.0f;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < lo ||
      v > hi) {
    return bad(std::string(name) + ": expected " +
               expected("a number", lo, hi, std::numeric_limits<float>::max()) + ", got '" +
               std::string(text) + "'");
  }
  return v;
}

// "2,17,99" (spaces allowed around the commas).
Result<std::vector<int32_t>> parse_ids(std::string_view name, std::string_view text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(pos, comma - pos);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    INFER_TRY(int32_t id, parse_int<int32_t>(name, item, 0, std::numeric_limits<int32_t>::max()));
    ids.push_back(id);
    pos = comma + 1;
  }
  return ids;
}

}  // namespace infer::cli
