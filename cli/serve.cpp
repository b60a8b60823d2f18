// infer --serve (docs/PROTOCOL.md): loads the session, then this thread only reads stdin
// (unbuffered read(2), so frames are handled as soon as they arrive, also while tokens stream)
// and hands the bytes to ServeFrontEnd; the pipeline's io thread writes the generation's frames.
#include "cli/serve.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "cli/serve_front_end.h"
#include "cli/session.h"

namespace infer::cli {

Result<int> run_serve(const Options& opts) {
  // A client that goes away must not kill the server mid-write: write() reports EPIPE instead.
  signal(SIGPIPE, SIG_IGN);
  INFER_TRY(std::unique_ptr<Session> session, open_session(opts, false));

  protocol::ServerHello hello;
  hello.vocab_size = uint32_t(session->forward->vocab_size());
  hello.max_generate_tokens = uint32_t(session->pipeline.engine.max_positions);
  hello.context_tokens = uint32_t(session->pipeline.engine.max_positions);
  for (const int32_t id : session->pipeline.engine.end_ids) hello.end_ids.push_back(uint32_t(id));
  hello.model_name = session->choice.demo ? "demo" : session->choice.dir.filename().string();
  if (hello.model_name.size() > protocol::kMaxLabelBytes) hello.model_name.resize(0);

  ServeFrontEnd front(STDOUT_FILENO, hello, opts.max_tokens);
  int status = 0;
  {
    actors::Pipeline pipeline(session->forward, session->pipeline, front);
    front.attach(&pipeline);
    front.set_trace(session->trace.get());
    std::fprintf(stderr, "infer: serving %s (%s) on stdin/stdout, protocol version %u\n",
                 hello.model_name.c_str(), session->backend_name.c_str(),
                 protocol::kProtocolVersion);
    uint8_t chunk[65536];
    for (;;) {
      const ssize_t n = read(STDIN_FILENO, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {  // EOF (or a read error): shut down as on EOF, no SHUTDOWN_ACK
        front.eof();
        front.finish_generation();
        break;
      }
      const ServeFrontEnd::Next next = front.feed(chunk, size_t(n));
      if (next == ServeFrontEnd::Next::kContinue) continue;
      front.finish_generation();
      if (!front.output_closed()) front.shutdown_ack();
      status = next == ServeFrontEnd::Next::kMismatch ? 1 : 0;
      break;
    }
    front.close_output();  // nothing after the last frame, whatever the pipeline still says
  }
  return status;
}

}  // namespace infer::cli
