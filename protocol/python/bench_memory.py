#!/usr/bin/env python3
"""Client-side latency of the episodic memory frames (docs/PROTOCOL.md 4.14-4.19) over
`infer --serve --memory`: a text of random words is appended (the small window evicts most of
it), then the first MEMORY_STORE (which learns the codebooks), a later one, MEMORY_QUERY,
MEMORY_RECALL of random 16-word excerpts (median and max), MEMORY_FORGET, and a STATS round trip
for scale. Times are at the client: frame out, answer in. Prints one line per figure.

  python3 protocol/python/bench_memory.py --infer build/infer \\
      --model $INFER_SHARED_FIXTURES/gemma4-text/e2b-vocab
"""

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import infer_client as ic  # noqa: E402

WORDS = ("apple river stone cloud window garden music paper silver dragon forest ocean "
         "mountain candle letter bridge").split()


def timed(f, *args):
    t0 = time.perf_counter()
    r = f(*args)
    return r, (time.perf_counter() - t0) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--infer", default="build/infer")
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", default="1")
    ap.add_argument("--words", type=int, default=2000)
    ap.add_argument("--recalls", type=int, default=20)
    args = ap.parse_args()
    rng = random.Random(7)
    text = [rng.choice(WORDS) for _ in range(args.words)]
    with tempfile.TemporaryDirectory() as d:
        c = ic.Client([args.infer, "--serve", "--model", args.model, "--threads", args.threads,
                       "--temperature", "0", "--memory", os.path.join(d, "bench.mem"),
                       "--anchors", "4", "--window", "256", "--recall", "64",
                       "--mem-capacity", "256"])
        c.append_text(" ".join(text))
        stored, ms = timed(c.memory_store)
        print("first MEMORY_STORE (learns the codebooks): %d episodes, %d tokens, %.0f ms"
              % (len(stored), sum(e["n_tokens"] for e in stored), ms))
        c.append_text(" " + " ".join(text[:300]))
        stored, ms = timed(c.memory_store)
        print("MEMORY_STORE: %d episodes, %.0f ms" % (len(stored), ms))
        page, ms = timed(c.memory_query)
        print("MEMORY_QUERY: %d episodes, %.1f ms" % (page["total"], ms))
        recalls = []
        for _ in range(args.recalls):
            i = rng.randrange(0, len(text) - 16)
            _, ms = timed(c.memory_recall, " ".join(text[i:i + 16]))
            recalls.append(ms)
        print("MEMORY_RECALL (16 words, %d episodes): median %.1f ms, max %.1f ms over %d"
              % (page["total"], statistics.median(recalls), max(recalls), len(recalls)))
        _, ms = timed(c.memory_forget, page["episodes"][0]["episode_id"])
        print("MEMORY_FORGET: %.1f ms" % ms)
        _, ms = timed(c.stats)
        print("STATS round trip: %.2f ms" % ms)
        return c.shutdown()


if __name__ == "__main__":
    sys.exit(main())
