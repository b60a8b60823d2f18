#!/usr/bin/env python3
"""What the --serve tests share: the fixtures, the server's command line, and a TestCase base
that starts servers (through the reference client or raw) and reaps them.

INFER (the binary) is set by the test module that runs, from its command line."""

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "protocol", "python"))
import infer_client as ic  # noqa: E402

INFER = None
TIMEOUT = 120


def fixture(name):
    return os.path.join(os.environ["INFER_TEST_FIXTURES"], "gemma4-text", name)


def vocab_dir():
    return os.path.join(os.environ["INFER_SHARED_FIXTURES"], "gemma4-text", "e2b-vocab")


def golden(d):
    with open(os.path.join(d, "golden.json")) as f:
        return json.load(f)


def serve_argv(model, *extra):
    return [INFER, "--serve", "--model", model, "--temperature", "0", "--threads", "2"] + list(extra)


def run_generation(client, **kw):
    tokens, done = [], None
    for msg in client.generate(**kw):
        if msg["op"] == "TOKEN":
            tokens.append(msg)
        elif msg["op"] == "DONE":
            done = msg
    return tokens, done


def reason(done):
    return ic.DONE_REASONS[done["reason"]]


def next_event(client, timeout=TIMEOUT):
    return client.events.get(timeout=timeout)


class ServeCase(unittest.TestCase):
    def start(self, model=None, *extra):
        c = ic.Client(serve_argv(model or fixture("e2b-mini"), *extra))
        self.addCleanup(self._stop, c)
        return c

    @staticmethod
    def _stop(c):
        if c.proc.poll() is None:
            c.proc.kill()
            c.proc.wait()
        for f in (c.proc.stdin, c.proc.stdout):
            try:
                f.close()
            except OSError:
                pass

    def expected_greedy(self, g, end_ids, n):
        """golden greedy tokens up to the first end id (which the protocol emits too)."""
        out = []
        for t in g["greedy_tokens"][:n]:
            out.append(t)
            if t in end_ids:
                break
        return out

    def raw_server(self, model=None):
        p = subprocess.Popen(serve_argv(model or fixture("e2b-mini")), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
        self.addCleanup(self._stop, type("C", (), {"proc": p})())
        return p

    @staticmethod
    def read_all(p):
        out = p.stdout.read()
        msgs = []
        for ev in ic.FrameDecoder().feed(out):
            _, op, flags, rid, payload = ev
            m = ic.decode_payload(op, payload, flags)
            m["rid"] = rid
            msgs.append(m)
        return msgs

    def cli_ids(self, model, prompt, n, *extra):
        out = subprocess.run([INFER, "--model", model, "--prompt-ids", ",".join(map(str, prompt)),
                              "--output", "ids", "-n", str(n), "--temperature", "0",
                              "--threads", "2"] + list(extra),
                             stdout=subprocess.PIPE, check=True, timeout=TIMEOUT).stdout
        return [int(x) for x in out.split()]
