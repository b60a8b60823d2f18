// tools: runs the model's calls off the decode thread (DESIGN.md §3). A built-in call runs here
// (detached: a command may take seconds); a client tool's call goes to the front end as a
// ToolEvent (on the events' path, through the gate) and is answered when Pipeline::tool_result
// delivers its result, or with an error after client_timeout. Each call is a "tools" span.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <utility>

#include "actors/stages.h"

namespace infer::actors {
namespace {

using json = nlohmann::json;

struct PendingCall {
  caf::typed_response_promise<ToolReply> promise;
  int64_t t0_ns = 0;
};

struct ToolsState {
  ToolSetup setup;
  std::shared_ptr<const ToolRegistry> registry;
  WiringPtr wiring;
  Tracer* tracer = nullptr;
  std::unordered_map<uint64_t, PendingCall> pending;  // client calls by call id
};

using Self = tools_actor::stateful_pointer<ToolsState>;

double ms_between(int64_t t0_ns, int64_t t1_ns) { return double(t1_ns - t0_ns) / 1e6; }

ToolReply error_reply(uint64_t call_id, const std::string& message) {
  return ToolReply{call_id, tool_json_text(json{{"error", message}}), true, 0.0};
}

ToolReply run_builtin(ToolsState& s, const ToolRequest& req) {
  TraceScope scope(s.tracer, "tools", "builtin call", int64_t(req.call_id));
  const int64_t t0 = steady_ns();
  const json args = json::parse(req.arguments, nullptr, false);
  const json result = s.setup.builtin->run(req.name, args);  // never throws
  ToolReply r{req.call_id, tool_json_text(result), result.is_object() && result.contains("error"),
              ms_between(t0, steady_ns())};
  return r;
}

void client_call(Self self, const ToolRequest& req, caf::typed_response_promise<ToolReply> rp) {
  ToolsState& s = self->state;
  ToolEvent e;
  e.kind = ToolEventKind::kClientCall;
  e.turn = req.turn;
  e.call_id = req.call_id;
  e.name = req.name;
  e.arguments = req.arguments;
  s.pending.emplace(req.call_id, PendingCall{std::move(rp), steady_ns()});
  // Through the gate, like the stream's events: the stream sent its kCall there before it asked
  // us, so the front end sees the call before the request to run it.
  self->send(s.wiring->gate, std::move(e));
  self->delayed_send(self, s.setup.client_timeout, ClientToolTimeout{req.call_id});
}

// Answers a pending client call (its result, or an error) and closes its span.
void finish_client(ToolsState& s, uint64_t call_id, ToolReply reply) {
  auto it = s.pending.find(call_id);
  if (it == s.pending.end()) return;  // answered already, or timed out
  const int64_t t1 = steady_ns();
  if (s.tracer != nullptr) {
    s.tracer->span("tools", "client call", it->second.t0_ns, t1, int64_t(call_id));
  }
  reply.ms = ms_between(it->second.t0_ns, t1);
  it->second.promise.deliver(std::move(reply));
  s.pending.erase(it);
}

tools_actor::behavior_type tools_fn(Self self, ToolSetup setup,
                                    std::shared_ptr<const ToolRegistry> registry,
                                    WiringPtr wiring, Tracer* tracer) {
  self->state.setup = std::move(setup);
  self->state.registry = std::move(registry);
  self->state.wiring = std::move(wiring);
  self->state.tracer = tracer;
  return {
      [=](const ToolRequest& req) {
        ToolsState& s = self->state;
        auto rp = self->make_response_promise<ToolReply>();
        if (s.setup.builtin == nullptr) {
          rp.deliver(error_reply(req.call_id, "tools are off (start with --tools ROOT)"));
        } else if (tools::BuiltinTools::has(req.name)) {
          rp.deliver(run_builtin(s, req));
        } else if (s.registry->is_client(req.name)) {
          client_call(self, req, rp);
        } else {
          rp.deliver(error_reply(req.call_id, "no tool named '" + req.name + "'"));
        }
        return rp;
      },
      [=](const ClientToolResult& r) {
        ToolsState& s = self->state;
        const json result = json::parse(r.result, nullptr, false);
        if (result.is_discarded()) {
          finish_client(s, r.call_id,
                        error_reply(r.call_id, "the client's result is not valid JSON"));
          return;
        }
        finish_client(s, r.call_id,
                      ToolReply{r.call_id, tool_json_text(result),
                                result.is_object() && result.contains("error"), 0.0});
      },
      [=](const ClientToolTimeout& t) {
        ToolsState& s = self->state;
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.3g s",
                      double(s.setup.client_timeout.count()) / 1000.0);
        finish_client(s, t.call_id, error_reply(t.call_id, std::string("the client did not "
                                                                       "answer within ") +
                                                               seconds));
      },
  };
}

}  // namespace

tools_actor spawn_tools(caf::actor_system& sys, ToolSetup setup,
                        std::shared_ptr<const ToolRegistry> registry, WiringPtr wiring,
                        Tracer* tracer) {
  return sys.spawn<caf::detached>(tools_fn, std::move(setup), std::move(registry),
                                  std::move(wiring), tracer);
}

}  // namespace infer::actors
