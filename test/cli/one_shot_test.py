#!/usr/bin/env python3
"""One-shot runs of build/infer as a user sees them: Ctrl-C mid-generation prints what was
generated and the timings and exits 130; the start's progress is one plain line a stage on a
pipe and a line redrawn in place on a terminal; the load line comes before the text and the text
ends with a newline before the timing lines. Usage: one_shot_test.py BUILD/infer"""

import os
import pty
import select
import signal
import subprocess
import sys
import time
import unittest

INFER = None
TIMEOUT = 120


def vocab_dir():
    return os.path.join(os.environ["INFER_SHARED_FIXTURES"], "gemma4-text", "e2b-vocab")


class OneShot(unittest.TestCase):
    def test_ctrl_c_prints_the_text_and_timings_then_exits_130(self):
        # e2b-vocab's random weights rarely pick an end id among 262,144: the run goes on until
        # the interrupt.
        p = subprocess.Popen([INFER, "--model", vocab_dir(), "--prompt-ids", "2", "-n", "1000000",
                              "--output", "ids", "--threads", "1"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        first = b""
        deadline = time.monotonic() + TIMEOUT
        while first.count(b" ") < 3 and time.monotonic() < deadline:  # a few ids are out
            ready, _, _ = select.select([p.stdout], [], [], 1.0)
            if ready:
                first += os.read(p.stdout.fileno(), 4096)
        self.assertGreaterEqual(first.count(b" "), 3, "no ids came out")
        p.send_signal(signal.SIGINT)
        rest, err = p.communicate(timeout=TIMEOUT)
        out, err = (first + rest).decode(), err.decode()
        self.assertEqual(p.returncode, 130, err)
        self.assertTrue(out.endswith("\n"), out[-40:])
        generated = len(out.split())
        self.assertIn("stopped by Ctrl-C", err)
        self.assertIn("(%d generated, stopped by Ctrl-C)" % generated, err)
        self.assertIn("prefill: 1 tokens", err)

    def test_progress_on_a_pipe_is_a_plain_line_before_the_load_line(self):
        r = subprocess.run([INFER, "--model", vocab_dir(), "--q8", "--prompt-ids", "2", "-n", "2",
                            "--output", "ids"], stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=TIMEOUT)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stderr.splitlines()
        self.assertIn("infer: quantizing to Q8_0 (5 layers)", lines)
        self.assertNotIn("\r", r.stderr)
        self.assertNotIn("\x1b", r.stderr)
        load = [i for i, l in enumerate(lines) if l.startswith("load: ")]
        self.assertEqual(len(load), 1, r.stderr)
        self.assertLess(lines.index("infer: quantizing to Q8_0 (5 layers)"), load[0])

    def test_progress_on_a_terminal_is_redrawn_in_place(self):
        # stderr on a pseudo-terminal, stdout a pipe.
        master, slave = pty.openpty()
        p = subprocess.Popen([INFER, "--model", vocab_dir(), "--q8", "--prompt-ids", "2", "-n",
                              "2", "--output", "ids"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        err = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            err += chunk
        out, _ = p.communicate(timeout=TIMEOUT)
        os.close(master)
        self.assertEqual(p.returncode, 0, err)
        err = err.decode()
        self.assertIn("\r\x1b[Kinfer: quantizing to Q8_0 0/5 layers", err)
        self.assertIn("load: ", err)
        self.assertEqual(len(out.split()), 2)

    def test_text_ends_with_a_newline_and_the_load_line_comes_first(self):
        # stdout and stderr into one pipe, as `infer ... 2>&1 | less` has them.
        r = subprocess.run([INFER, "--model", vocab_dir(), "hello", "-n", "4", "--temperature",
                            "0"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT)
        self.assertEqual(r.returncode, 0, r.stdout)
        lines = r.stdout.split("\n")
        self.assertTrue(lines[0].startswith("cpu: "), r.stdout)  # the thread choice
        self.assertTrue(lines[1].startswith("load: "), r.stdout)
        self.assertTrue(lines[-3].startswith("prefill: "), r.stdout)
        self.assertTrue(lines[-2].startswith("decode: "), r.stdout)


if __name__ == "__main__":
    INFER = sys.argv.pop(1)
    unittest.main(verbosity=2)
