#!/usr/bin/env python3
"""Episodic memory as a user runs it (infer --memory): one process streams text through the
pipe session and exits, its episodes are in the file (--mem-list, no model loaded), and a later
process recalls them into the ring before its turn generates (a "memory place" span in its
trace, the episode's recall count in --mem-list). A second process on the same file, a file that
is not a store and --no-memory each behave as documented. Usage: memory_cli_test.py BUILD/infer"""

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import unittest

INFER = None
TIMEOUT = 120
RING = ["--anchors", "4", "--window", "64", "--recall", "64", "--episode-tokens", "32",
        "-n", "4", "--threads", "1"]
WORDS = ("apple river stone cloud window garden music paper silver dragon forest ocean "
         "mountain candle letter bridge").split()


def vocab_dir():
    return os.path.join(os.environ["INFER_SHARED_FIXTURES"], "gemma4-text", "e2b-vocab")


def lines(seed, n, words):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(n)]


def infer(args, stdin_text=None):
    return subprocess.run([INFER, "--model", vocab_dir()] + args, input=stdin_text,
                          capture_output=True, text=True, timeout=TIMEOUT)


def mem_list(path):
    p = subprocess.run([INFER, "--memory", path, "--mem-list"], capture_output=True, text=True,
                       timeout=TIMEOUT)
    return p


def span_names(trace_path):
    with open(trace_path) as f:
        events = json.load(f)
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    return [e.get("name", "") for e in events]


class Memory(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.mem = os.path.join(self.dir.name, "m.mem")

    def tearDown(self):
        self.dir.cleanup()

    def test_a_later_process_recalls_what_an_earlier_one_stored(self):
        text = lines(1, 8, 60)
        p1 = infer(["--memory", self.mem] + RING, "\n".join(text) + "\n")
        self.assertEqual(p1.returncode, 0, p1.stderr)
        self.assertNotIn("infer: memory:", p1.stderr)
        listed = mem_list(self.mem)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        episodes = [l for l in listed.stdout.splitlines() if re.match(r"^\d+\s+pos ", l)]
        self.assertGreaterEqual(len(episodes), 4, listed.stdout)
        recalled_before = sum(int(m) for m in re.findall(r"\((\d+)\)", listed.stdout))

        trace = os.path.join(self.dir.name, "t2.json")
        excerpt = " ".join(text[2].split()[10:40])
        p2 = infer(["--memory", self.mem, "--trace", trace] + RING, excerpt + "\n")
        self.assertEqual(p2.returncode, 0, p2.stderr)
        self.assertNotIn("infer: memory:", p2.stderr)
        names = span_names(trace)
        self.assertIn("memory recall", names)
        self.assertIn("memory place", names)
        after = mem_list(self.mem)
        recalled_after = sum(int(m) for m in re.findall(r"\((\d+)\)", after.stdout))
        self.assertGreater(recalled_after, recalled_before, after.stdout)

    def test_a_second_process_is_told_who_holds_the_file(self):
        holder = subprocess.Popen([INFER, "--model", vocab_dir(), "--memory", self.mem] + RING,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + TIMEOUT
            while not os.path.exists(self.mem) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)  # the lock is taken right after the file is sized
            p = infer(["--memory", self.mem] + RING, "hello\n")
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(f"in use by pid {holder.pid}", p.stderr)
        finally:
            holder.stdin.close()
            holder.wait(timeout=TIMEOUT)
        self.assertEqual(holder.returncode, 0, holder.stderr.read())

    def test_a_file_that_is_not_a_store_is_refused_in_one_line(self):
        with open(self.mem, "wb") as f:
            f.write(os.urandom(100000))
        p = infer(["--memory", self.mem] + RING, "hello\n")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn(self.mem, p.stderr)
        listed = mem_list(self.mem)
        self.assertEqual(listed.returncode, 1)

    def test_without_memory_nothing_is_written_and_no_memory_conflicts_with_it(self):
        p = subprocess.run([INFER, "--model", vocab_dir()] + RING, input="hello\n",
                           capture_output=True, text=True, timeout=TIMEOUT, cwd=self.dir.name)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(os.listdir(self.dir.name), [])
        p = infer(["--memory", self.mem, "--no-memory"] + RING, "hello\n")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--no-memory conflicts with --memory", p.stderr)
        self.assertFalse(os.path.exists(self.mem))


if __name__ == "__main__":
    INFER = os.path.abspath(sys.argv.pop(1))
    unittest.main()
