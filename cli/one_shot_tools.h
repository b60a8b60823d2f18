// Tool calls in a one-shot --chat run (--tools ROOT): the call loop's sink over the token
// printer, with the built-in tools run on this thread (no actors here) and each call and result
// said on stderr as the REPL says them.
#pragma once

#include "actors/engine.h"
#include "actors/tool_loop.h"
#include "tools_vfs/builtin_tools.h"

namespace infer::cli {

class OneShotToolSink : public actors::ToolTurnSink {
 public:
  // printer gets every token outside a call (and, with show_calls, the call's tokens too: ids
  // output shows everything). Both must outlive the sink.
  OneShotToolSink(actors::TokenSink& printer, const tools::BuiltinTools& tools, bool show_calls)
      : printer_(printer), tools_(tools), show_calls_(show_calls) {}

  actors::Verdict token(const actors::Step& s, bool in_call) override;
  void event(const actors::ToolEvent& e) override;
  actors::ToolAnswer run(uint64_t call_id, const std::string& name,
                         const nlohmann::json& arguments) override;

 private:
  actors::TokenSink& printer_;
  const tools::BuiltinTools& tools_;
  bool show_calls_;
};

}  // namespace infer::cli
