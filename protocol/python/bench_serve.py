#!/usr/bin/env python3
"""What the --serve protocol adds to decode time (issue 5: under 5% at the CPU path's speed).

Runs, on the same model in the same run:
  1. `infer --bench-actors -n N`: the bare decode loop and the actor pipeline (tokens/s);
  2. `infer --serve`, driven by the reference client: N greedy tokens generated from the same
     kind of id prompt, timed at the client from each generation's first TOKEN to its DONE
     (so the frames, the pipe, the client's reader thread and the decoding are all inside).
Repeats the two in interleaved rounds (the machine may be shared) and reports the medians of
tokens/s and the protocol's added cost vs the bare loop and vs the actors, as JSON (stdout, or
--out FILE).

  python3 protocol/python/bench_serve.py --infer build/infer --model test/fixtures/gemma4-text/e2b-mini -n 512
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import infer_client as ic  # noqa: E402


def serve_run(argv, prompt, n):
    """Generates n tokens (several GENERATEs when an end id stops one); returns tokens/s over the
    decode spans (first TOKEN -> DONE) and the server's own STATS."""
    c = ic.Client(argv)
    try:
        c.append_ids(prompt)
        decoded, span = 0, 0.0
        left = n
        while left > 0:
            first = None
            count = 0
            for msg in c.generate(max_tokens=left):
                if msg["op"] == "TOKEN":
                    count += 1
                    if first is None:
                        first = time.perf_counter()
                elif msg["op"] == "DONE":
                    end = time.perf_counter()
            if count == 0:
                break
            decoded += count - 1  # the first token of a generation comes from the prefill
            span += end - first
            left -= count
        stats = c.stats()
    finally:
        c.shutdown()
    return (decoded / span if span > 0 else 0.0), stats


def median(v):
    v = sorted(v)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2 if v else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--infer", default="build/infer")
    ap.add_argument("--model", required=True)
    ap.add_argument("-n", type=int, default=512, help="tokens per run")
    ap.add_argument("--reps", type=int, default=5, help="rounds of (bench-actors, serve)")
    ap.add_argument("--threads", type=int, default=0, help="--threads for infer (0: its default)")
    ap.add_argument("--out", help="write the JSON here too")
    args = ap.parse_args()

    common = ["--model", args.model, "--temperature", "0"]
    if args.threads:
        common += ["--threads", str(args.threads)]
    argv = [args.infer, "--serve", "-n", str(args.n)] + common
    probe = ic.Client(argv)
    vocab = probe.hello["vocab_size"]
    probe.shutdown()
    prompt = [(i * 7919 + 13) % vocab for i in range(32)]
    # The machine is shared and noisy: each round measures the three side by side, each as the
    # best of two runs (as --bench-actors does for bare and actors), and the report takes the
    # medians over the rounds, and the median of each round's own ratio.
    rounds = []
    bench = {}
    for _ in range(args.reps):
        bench = json.loads(subprocess.run([args.infer, "--bench-actors", "-n", str(args.n)] + common,
                                          check=True, stdout=subprocess.PIPE).stdout)
        serve_tps, stats = 0.0, None
        for _ in range(2):
            tps, st = serve_run(argv, prompt, args.n)
            if tps > serve_tps:
                serve_tps, stats = tps, st
        rounds.append({"bare": bench["bare_tokens_per_s"], "actors": bench["actors_tokens_per_s"],
                       "serve": serve_tps,
                       "serve_engine_decode": stats["decode_tok_s"] if stats else 0.0})
    bare = median([r["bare"] for r in rounds])
    actors = median([r["actors"] for r in rounds])
    serve_tps = median([r["serve"] for r in rounds])
    out = {
        "model_dir": args.model,
        "backend": bench.get("backend"),
        "threads": bench.get("threads"),
        "tokens": args.n,
        "rounds": args.reps,
        "bare_tokens_per_s": bare,
        "actors_tokens_per_s": actors,
        "serve_tokens_per_s": serve_tps,
        "serve_engine_decode_tokens_per_s": median([r["serve_engine_decode"] for r in rounds]),
        "serve_added_vs_bare_pct": (bare / serve_tps - 1.0) * 100 if serve_tps else None,
        "serve_added_vs_actors_pct": (actors / serve_tps - 1.0) * 100 if serve_tps else None,
        "serve_added_us_per_token_vs_bare": (1 / serve_tps - 1 / bare) * 1e6 if serve_tps else None,
        # each round's own ratio: the two runs were seconds apart, so load changes cancel better
        "serve_added_vs_bare_pct_median_of_rounds":
            median([(r["bare"] / r["serve"] - 1.0) * 100 for r in rounds if r["serve"]]),
        "serve_added_vs_actors_pct_median_of_rounds":
            median([(r["actors"] / r["serve"] - 1.0) * 100 for r in rounds if r["serve"]]),
        "per_round": rounds,
        # a loaded machine makes the comparison noise: check this before reading the numbers
        "load_avg_1m": os.getloadavg()[0],
        "cpu_count": os.cpu_count(),
    }
    text = json.dumps(out, indent=2) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
