// One-shot generation: encode the prompt (or take raw ids), prefill, then sample and stream the
// continuation to stdout token by token; and --tokenize, which prints a prompt's ids.
#pragma once

#include "base/result.h"
#include "cli/options.h"

namespace infer::cli {

// Generates and streams; timings go to stderr at the end. The exit status: 0, or 130 when
// Ctrl-C stopped it (what was generated and the timings are printed all the same).
Result<int> run_generate(const Options& opts);
// Prints the ids of opts.prompt (with <bos>) on one line; with --chat, those of its user turn.
Result<void> run_tokenize(const Options& opts);

}  // namespace infer::cli
