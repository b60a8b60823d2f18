// infer --serve (docs/PROTOCOL.md): loads the session and the pipeline, then this thread reads
// stdin through ServeFrontEnd::run until the session ends; the pipeline's io thread writes the
// generation's frames.
#include "cli/serve.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>

#include "cli/chat_turn.h"
#include "cli/serve_front_end.h"
#include "cli/serve_tools.h"
#include "cli/session.h"

namespace infer::cli {

Result<int> run_serve(const Options& opts) {
  // A client that goes away must not kill the server mid-write: write() reports EPIPE instead.
  signal(SIGPIPE, SIG_IGN);
  INFER_TRY(std::unique_ptr<Session> session, open_session(opts, opts.system_prompt.has_value()));
  if (opts.system_prompt) {
    // Every context (at start and after each RESET) opens with <bos> and this system turn; the
    // client then appends its user turns.
    // With --tools the turn declares the built-in tools too (as cli/session.cpp's without
    // --system), so that the model knows them.
    std::vector<int32_t>& preamble = session->pipeline.engine.preamble;
    const std::vector<ToolDeclaration> tools = session->pipeline.tools.builtin
                                                   ? actors::builtin_declarations()
                                                   : std::vector<ToolDeclaration>();
    preamble = system_turn_ids(*session->tokenizer, *opts.system_prompt, opts.special, tools);
    if (int64_t(preamble.size()) >= session->stream_capacity) {
      return make_error(ErrorCode::kInvalidArgument,
                        "--system: the system turn is " + std::to_string(preamble.size()) +
                            " tokens, the context holds " +
                            std::to_string(session->stream_capacity));
    }
  }

  // --tools: PTYs and interrupts for the tool frames; acked interrupts are injected between
  // tokens and pending ones are the gate's urgency, as in the REPL. Declared before the
  // pipeline, which uses them until it ends; ended (every child reaped) after it.
  std::unique_ptr<ServeTools> tools;
  if (session->pipeline.tools.builtin) {
    INFER_TRY(tools, ServeTools::open(opts.tools_root.string()));
    session->pipeline.engine.boundary = tools->injection(*session->tokenizer);
    session->pipeline.gate.pending_interrupts = &tools->pending_counter();
    tools->set_tracer(session->pipeline.tracer);
    // TOOL_DECLARE rewrites the opening system turn with the client's tools (§4.21), within
    // the anchors (eviction never drops them; without the ring the whole context holds them).
    tools->set_opening_turn({&*session->tokenizer, opts.system_prompt.value_or(""), opts.special,
                             session->ring ? session->anchors : session->stream_capacity - 1});
    // A client call waits for its TOOL_RESULT (§4.22); the engine's own bound on a tool's wait
    // (actors/stream_actor.cpp, 10 minutes) still ends it.
    session->pipeline.tools.client_timeout = std::chrono::hours(24);
  }

  protocol::ServerHello hello;
  hello.vocab_size = uint32_t(session->forward->vocab_size());
  hello.max_generate_tokens =
      uint32_t(session->ring ? kRingMaxGenerate : session->pipeline.engine.max_positions);
  hello.context_tokens = uint32_t(session->context_tokens);
  for (const int32_t id : session->pipeline.engine.end_ids) hello.end_ids.push_back(uint32_t(id));
  hello.model_name = session->choice.demo ? "demo" : session->choice.dir.filename().string();
  if (hello.model_name.size() > protocol::kMaxLabelBytes) hello.model_name.resize(0);

  ServeFrontEnd front(STDOUT_FILENO, hello, opts.max_tokens, session->stream_capacity,
                      int64_t(session->pipeline.engine.preamble.size()),
                    session->pipeline.memory != nullptr);
  int status = 0;
  {
    actors::Pipeline pipeline(session->forward, session->pipeline, front);
    front.attach(&pipeline);
    front.set_trace(session->trace.get());
    if (tools) {
      tools->attach(&pipeline);
      front.set_tools(tools.get());
    }
    std::fprintf(stderr, "infer: serving %s (%s) on stdin/stdout, protocol version %u\n",
                 hello.model_name.c_str(), session->backend_name.c_str(),
                 protocol::kProtocolVersion);
    status = front.run(STDIN_FILENO);
  }
  return status;
}

}  // namespace infer::cli
