// infer: parses the command line and runs one mode (generate, the interactive session,
// --tokenize, --bench, --bench-actors). Every failure is one line "infer: ..." on stderr:
// exit status 2 for usage errors, 1 for everything else.
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "memory/mem_list.h"
#include "cli/bench.h"
#include "cli/bench_actors.h"
#include "cli/generate.h"
#include "cli/load_progress.h"
#include "cli/options.h"
#include "cli/repl.h"
#include "cli/serve.h"
#include "cli/threads.h"
#include "cli/version.h"

namespace {

int fail(int status, std::string message) {
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fflush(stdout);
  std::fprintf(stderr, "infer: %s\n", message.c_str());
  return status;
}

int run(const std::vector<std::string_view>& args) {
  using namespace infer::cli;
  infer::Result<Options> opts = parse_options(args);
  if (!opts) return fail(2, opts.error().message);
  if (opts->help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  if (opts->version) {
    std::printf("infer %s\n", version_string().c_str());
    return 0;
  }
  if (const infer::Result<void> t = check_threads(*opts, cpu_info()); !t) {
    return fail(2, t.error().message);
  }
  if (const infer::Result<void> f = read_prompt_file(*opts); !f) {
    return fail(1, f.error().message);
  }
  if (opts->mem_list) {  // the store's episodes, without loading a model
    if (!opts->memory) return fail(2, "--mem-list needs --memory PATH");
    if (const infer::Result<void> r = infer::memory::print_mem_list(opts->memory->string(), stdout);
        !r) {
      return fail(1, r.error().message);
    }
    return 0;
  }
  if (const std::string missing = unavailable_feature(*opts); !missing.empty()) {
    return fail(2, missing);
  }
  // No prompt: the interactive session on a terminal, one turn a line from a pipe or file;
  // with stdin /dev/null or closed there is nothing to do (--prompt-ids 2 generates from <bos>).
  const bool no_prompt = !opts->bench && !opts->bench_actors && !opts->tokenize && !opts->serve &&
                         !opts->prompt && !opts->prompt_ids;
  if (no_prompt && stdin_kind() == StdinKind::kOther) {
    std::fprintf(stderr, "infer: nothing to do: no prompt, and stdin is not a terminal, pipe or "
                         "file (give PROMPT, or --prompt-ids 2 to generate from <bos>)\n");
    return 0;
  }
  const bool session = no_prompt;
  if (opts->memory && !opts->no_memory && !session && !opts->serve && !opts->bench_memory) {
    return fail(2, "--memory applies to the interactive/pipe session and --serve (one turn a "
                   "line: printf 'PROMPT\\n' | infer --memory ...)");
  }
  if (!opts->trace_file.empty() && !session && !opts->serve && !opts->bench_actors) {
    // The trace follows the actor pipeline, which only the session, --serve and --bench-actors
    // run.
    std::fprintf(stderr, "infer: --trace applies to the interactive/pipe session and --serve; "
                         "this run is not traced\n");
  }
  // What a long start is doing (quantizing, uploading), on stderr as it happens.
  ConsoleProgress progress(isatty(STDERR_FILENO) != 0);
  infer::install_progress_reporter(&progress);
  if (opts->serve) {
    const infer::Result<int> served = run_serve(*opts);
    if (!served) return fail(1, served.error().message);
    return *served;
  }
  if (!session && !opts->bench && !opts->bench_actors && !opts->tokenize) {
    const infer::Result<int> generated = run_generate(*opts);
    if (!generated) {
      return fail(generated.error().code == infer::ErrorCode::kInvalidArgument ? 2 : 1,
                  generated.error().message);
    }
    return *generated;
  }
  const infer::Result<void> r = opts->bench          ? run_bench(*opts)
                                : opts->bench_actors ? run_bench_actors(*opts)
                                : opts->tokenize     ? run_tokenize(*opts)
                                                     : run_repl(*opts, stdin_kind() == StdinKind::kTerminal);
  if (!r) {
    return fail(r.error().code == infer::ErrorCode::kInvalidArgument ? 2 : 1, r.error().message);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  try {
    return run(args);
  } catch (const std::bad_alloc&) {
    return fail(1, "out of memory");
  } catch (const std::exception& e) {
    return fail(1, std::string("internal error: ") + e.what());
  }
}
