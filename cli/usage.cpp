// The --help text: every switch, its default, and which ones wait for a later part of the engine.
#include "cli/options.h"

namespace infer::cli {

std::string usage() {
  return R"(usage: infer [options] [PROMPT]
       infer --bench [FILE] [--model DIR] [--q8|--q4] [--threads N]

Runs a Gemma 4 text model (Hugging Face layout) on the CPU: encodes PROMPT with <bos>, prefills it
and streams the continuation to stdout. Timings go to stderr.

chat handling: a one-shot prompt (PROMPT, -p or -f) gets no template unless --chat; the REPL and
the pipe mode wrap each input in Gemma turns; --serve appends exactly the text or ids a client
sends (the Python client's --chat mode writes the turns).

model and input
  -m, --model DIR          checkpoint directory (config.json, *.safetensors, tokenizer.json);
                           default ../gemma-4-E2B if it exists, else a built-in demo model with
                           random weights (generated once into the cache directory);
                           a CONFIG.json file instead: random bf16 weights of its shapes
                           generated in memory (seed 1, as mkmodel writes them), for benchmarks
  -p, --prompt TEXT        the prompt (or give it as the one positional argument)
  -f, --file FILE          the prompt is FILE's text (not with -p or PROMPT)
      --prompt-ids IDS     raw token ids instead of text, e.g. 2,17,99 (no <bos> added)
  -n, --max-tokens N       tokens to generate (default 256); stops earlier at <eos> or <turn|>
      --output text|ids    print the continuation as text (default) or as space-separated ids
      --tokenize           print the prompt's ids (with <bos>) and exit
      --dump-logits FILE   write the logits of every prompt position, little-endian float32
                           [positions x vocab]
      --chat               one-shot: wrap the prompt in a Gemma user turn and stop at the end of
                           the model's turn (the REPL always uses turns)
      --system TEXT        a system turn at the start of the context (REPL, --chat, --serve)
      --special            let user text spell control tokens such as <|turn> and <turn|>;
                           without it they are tokenized as plain text (REPL and --chat)

sampling (defaults from the model's generation_config.json; flags win)
      --temperature F, --temp F
                           0 = greedy. Without flags or do_sample in the file: greedy (as HF)
      --top-k N            keep the N most likely tokens (0 = off; HF default 50 when sampling)
      --top-p F            keep the smallest set with probability >= F (1 = off)
      --min-p F            drop tokens whose probability is below F times the top token's,
                           after top-k and top-p (0 = off, the default)
      --seed N             random seed (default: random, printed on stderr)
                           --top-k/--top-p/--min-p alone turn sampling on at the file's
                           temperature or 1
      --repeat-penalty F   divide the logit of every id among the last N of the context (prompt
                           and generated) by F when positive, multiply it when negative, greedy
                           included, as llama.cpp (default 1 = off)
      --repeat-last-n N    the N of --repeat-penalty (default 64; 0 = off)

backend
  -t, --threads N          worker threads (default: one per 8 MB a decode step reads, at most
                           the physical cores; a tiny model gets 1; the choice is on stderr)
      --force-threads      allow --threads above the CPUs this process may run on
      --q8                 quantize every projection and the head to Q8_0 at load
      --q4, --mixed        Q4_0 projections with a Q8_0 head
      --quant q4|q8|none   the same as a single switch (none: weights as stored, bf16)
      --gpu                Vulkan backend (the device report goes to stderr)
      --device N           with --gpu: Vulkan device N (default: the first GPU)
      --gpu-tune K=V,...   with --gpu: override GPU tuning knobs (keys: gpu/tuning.h; the bench
                           JSON's gpu_tuning lists each with its value)
      --prefill-chunk N    with --gpu: tokens a prefill chunk (default: from the device)

modes
      --bench [FILE]       measure load, prefill (512 tokens), decode (128 tokens), memory
                           bandwidth and tokenizer speed; JSON to stdout or FILE
      --profile            with --bench --gpu: GPU time of every command of one decode step and
                           one prefill chunk (timestamps), summed per pipeline into the JSON;
                           each pipeline's register count and spills on stderr, where the
                           driver reports them
      --serve              binary full-duplex protocol on stdin/stdout (docs/PROTOCOL.md)

KV ring (CPU and --gpu, on by default): an endless stream in fixed buffers, equal to the exact
model while it fits in anchors + window
      --anchors A          first tokens kept for ever (default 32)
  -c, --ctx-size W, --window W
                           most recent tokens kept (default 512)
      --recall R           slots for recalled rows, R <= 128 (default 96)
      --evict fifo|mass    drop the oldest window token (default) or the least attended
      --no-ring            a fixed cache instead (max_position_embeddings, at most 8192 tokens
                           in a session): exact until it is full, then refuses input
                           A ring or cache larger than the memory there is (MemAvailable, or the
                           GPU's device-local heap with --gpu) is refused before it is allocated
      --bench-stream N     with --bench: N decode steps from position 0, a point every
      --bench-every K      K tokens (default N/50): ms/token and resident memory
      --bench-context N,.. with --bench: decode speed after N tokens, exact cache vs ring
                           (caches filled with synthetic rows; the decode steps are real)
      --quiescence         decode tokens whose residual stream barely moves skip the upper
                           layers (their effect carried from the last full token, KV still filled)
      --quiescence-threshold T  skip below this smoothed velocity, 1 - cos (default 0.001)
      --bench-quiescence N with --bench: N greedy tokens, exact vs --quiescence at several
                           thresholds (layers skipped, speedup, greedy agreement, KL)
      --bench-memory N     with --bench --memory NEW_PATH: decode N tokens a run, memory off
                           and on side by side; recall latency at 64/1,000/10,000 episodes;
                           stored bytes per token (NEW_PATH and NEW_PATH.* are scratch, removed)

episodic memory (docs/MEMORY.md; with the KV ring)
      --memory [PATH]      keep what leaves the window, and quiet spans, as episodes in PATH
                           (default .episodic.mem) and recall them into the ring's recall tier
                           before each turn generates; a later session recalls them too.
                           REPL: /memory, /remember, /forget N; --serve: the memory frames
      --storage PATH       the same as --memory PATH
      --mem-capacity N     episodes the file holds (default 64; the weakest makes room)
      --episode-tokens N   tokens an episode holds (default 64)
      --no-memory          no episodic memory (the default; conflicts with --memory)
      --mem-list           print the episodes of --memory's file and exit (no model loaded)

tools (docs/TOOLS.md; the session, --chat, --serve)
      --tools ROOT         let the model call the built-in tools on the directory ROOT (list,
                           stat, read in chunks, write, mkdir, remove, search, run a command):
                           declared in the system turn, results written back into its turn.
                           Without it a call the model writes is reported, not run. REPL: /tools
      --tool-steps N       tool calls a turn may make (default 8; 0: every call gets an error);
                           the call past N gets an error response and the turn ends

interactive session (no prompt: a tty on stdin opens the REPL, a pipe is read one turn a line)
      --gate-entropy F     the gate stops and listens when a step's entropy is above F nats
      --gate-top-prob P    ... when the most likely token's probability is below P
      --gate-end-prob P    ... when the end-of-turn probability reaches P
      --gate-yield         ... as soon as more input is waiting
      --gate-interrupts N  ... acts (stops the turn, "act") once N tool interrupts are pending
                           (--tools: PTY output or client events waiting for /ack or an action)
                           (default: speak until the end of the turn or -n tokens)
      --consolidate-after S  seconds without input before a quiet span (default 6)
      --trace FILE         Chrome trace-event JSON of the session (open in ui.perfetto.dev):
                           a span per actor message, token, prefill chunk, GPU submit/wait
      --bench-actors [FILE]  tokens/s through the actor pipeline vs the bare decode loop and
                           the added latency per token; JSON to stdout or FILE

  -h, --help               this text
      --version            print the version (and the git commit it was built from)

Exit status: 0 success, 1 a runtime error (missing or corrupt model, I/O), 2 a usage error.
)";
}

}  // namespace infer::cli
