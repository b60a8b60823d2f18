// The one-shot run's tool sink: the printer for text, stderr for the calls, the tools inline.
#include "cli/one_shot_tools.h"

#include <chrono>
#include <cstdio>

#include "cli/console_front_end.h"

namespace infer::cli {

actors::Verdict OneShotToolSink::token(const actors::Step& s, bool in_call) {
  if (in_call && !show_calls_) return actors::Verdict::kKeep;
  return printer_.token(s);
}

void OneShotToolSink::event(const actors::ToolEvent& e) {
  std::fflush(stdout);
  std::fprintf(stderr, "\n%s\n", describe_tool_event(e).c_str());
}

actors::ToolAnswer OneShotToolSink::run(uint64_t, const std::string& name,
                                        const nlohmann::json& arguments) {
  const auto t0 = std::chrono::steady_clock::now();
  actors::ToolAnswer a;
  a.result = tools_.run(name, arguments);
  a.error = a.result.is_object() && a.result.contains("error");
  a.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return a;
}

}  // namespace infer::cli
