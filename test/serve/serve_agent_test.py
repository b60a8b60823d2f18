#!/usr/bin/env python3
"""The agent session of issue 30 over the real `infer --serve --tools ROOT` (docs/PROTOCOL.md
4.24-4.29, docs/TOOLS.md "Interrupts"): a client opens two PTYs running bash, types commands,
hears their output as interrupts while a generation runs, acks one (and a client event after
it) and snoozes the other. The TOKENs of the generation rebuild the context: the acked output
is in it, framed as a tool response, in ack order at the positions the `injected` events name;
the snoozed output is not, and that interrupt is pending again once the turn is over.

usage: serve_agent_test.py INFER [unittest args]; fixtures as serve_test.py."""

import sys
import tempfile
import threading
import time
import unittest

import serve_support as ss
from serve_support import ic

WAIT_S = 30  # every wait below is bounded by this
BASH = ["bash", "--norc", "--noprofile"]


class EventLog:
    """TOOL_EVENTs as they arrive (the reader thread), with a bounded wait for one that fits."""

    def __init__(self):
        self.events = []
        self.cv = threading.Condition()

    def __call__(self, msg):
        with self.cv:
            self.events.append(msg)
            self.cv.notify_all()

    def wait_for(self, pred, what):
        deadline = time.monotonic() + WAIT_S
        with self.cv:
            while True:
                for e in self.events:
                    if pred(e):
                        return e
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("no %s within %d s: %r" % (what, WAIT_S, self.events))
                self.cv.wait(left)

    def interrupts(self, iid):
        with self.cv:
            return [e for e in self.events if e["kind"] == 4 and e["interrupt_id"] == iid]


def pty_said(log, pty, text):
    """Waits for a pty_output event of PTY `pty` whose stripped text holds `text`."""
    return log.wait_for(lambda e: e["kind"] == 2 and e["pty_id"] == pty and text in e["text"],
                        "output %r from PTY %d" % (text, pty))


def pending_of(log, pty):
    """The interrupt id of the PTY's pending interrupt (source 1 = a PTY)."""
    e = log.wait_for(lambda e: e["kind"] == 4 and e["source"] == 1 and e["source_id"] == pty
                     and e["state"] == 1, "a pending interrupt of PTY %d" % pty)
    return e["interrupt_id"]


class AgentSession(ss.ServeCase):
    def test_pty_output_acked_mid_generation_joins_the_context_and_the_snoozed_does_not(self):
        root = tempfile.mkdtemp(prefix="infer-agent-")
        log = EventLog()
        c = ic.Client(ss.serve_argv(ss.vocab_dir(), "--tools", root, "--system", "You are an agent."),
                      on_tool_event=log)
        self.addCleanup(self._stop, c)
        c.tool_watch()
        alpha, _ = c.pty_open(BASH)
        beta, _ = c.pty_open(BASH)

        # A generation that runs until interrupted (random weights never stop on their own here).
        frames, gen_done = [], threading.Event()

        def generate():
            try:
                for m in c.generate(max_tokens=1 << 20, stop_at_eot=False):
                    frames.append(m)
            finally:
                gen_done.set()

        c.append_text("<|turn>user\nRun the checks.<turn|>\n<|turn>model\n")
        gen = threading.Thread(target=generate, daemon=True)
        gen.start()

        # The commands' output arrives while the model speaks: each PTY raises its interrupt.
        c.pty_write(alpha, "echo ALPHA_$((6*7))\n")  # the echo of the command says ALPHA_$((6*7))
        pty_said(log, alpha, b"ALPHA_42")
        c.pty_write(beta, "echo BETA_$((7*8))\n")
        pty_said(log, beta, b"BETA_56")
        a_id, b_id = pending_of(log, alpha), pending_of(log, beta)
        self.assertNotEqual(a_id, b_id)
        c.interrupt_action(b_id, "snooze")  # until the turn ends
        c.interrupt_action(a_id, "ack")
        a_in = log.wait_for(lambda e: e["kind"] == 4 and e["interrupt_id"] == a_id
                            and e["state"] == 5, "PTY %d's interrupt injected" % alpha)
        # A client event after it, acked too: it goes in after the first.
        g_id = c.raise_interrupt(7, "GAMMA_EVENT from the build")
        c.interrupt_action(g_id, "ack")
        g_in = log.wait_for(lambda e: e["kind"] == 4 and e["interrupt_id"] == g_id
                            and e["state"] == 5, "the client event injected")
        self.assertFalse(gen_done.is_set(), "the generation ended before the injections")
        c.interrupt()
        self.assertTrue(gen_done.wait(WAIT_S))
        gen.join(WAIT_S)

        tokens = [m for m in frames if m["op"] == "TOKEN"]
        done = frames[-1]
        self.assertEqual(done["op"], "DONE")
        self.assertEqual(ss.reason(done), "interrupted")
        # Every token the context gained is a TOKEN: positions without gaps, DONE counts them all.
        self.assertEqual(done["n_tokens"], len(tokens))
        self.assertEqual([t["index"] for t in tokens], list(range(len(tokens))))
        first = tokens[0]["pos"]
        self.assertEqual([t["pos"] for t in tokens], list(range(first, first + len(tokens))))
        self.assertEqual(done["pos"], tokens[-1]["pos"] + 1)
        self.assertEqual(c.stats()["pos"], done["pos"])

        by_pos = {t["pos"]: t for t in tokens}

        def text_at(e):
            return "".join(by_pos[p]["text"] for p in range(e["pos"], e["pos"] + e["n_tokens"]))

        a_text, g_text = text_at(a_in), text_at(g_in)
        # Framed as a tool response from the PTY (docs/TOOLS.md "Interrupts").
        self.assertIn("ALPHA_42", a_text)
        self.assertTrue(a_text.startswith("<|tool_response>response:pty{"), a_text)
        self.assertIn("interrupt:%d" % a_id, a_text)
        self.assertTrue(a_text.endswith("<tool_response|>"), a_text)
        self.assertIn("GAMMA_EVENT from the build", g_text)
        self.assertTrue(g_text.startswith("<|tool_response>response:client{id:7,"), g_text)
        # In ack order, with generated tokens around them: the model went on after each.
        self.assertLess(a_in["pos"] + a_in["n_tokens"], g_in["pos"])
        self.assertGreater(tokens[-1]["pos"], g_in["pos"] + g_in["n_tokens"] - 1)
        # Exactly what was acked: the snoozed output is nowhere in the context's new tokens.
        everything = "".join(t["text"] for t in tokens)
        self.assertNotIn("BETA_56", everything)
        self.assertEqual(everything.count("<|tool_response>"), 2)
        # The snooze lasted until the turn's end: then the interrupt is pending again.
        log.wait_for(lambda e: e["kind"] == 4 and e["interrupt_id"] == b_id and e["state"] == 1
                     and e is not log.interrupts(b_id)[0], "the snoozed interrupt pending again")
        states = [e["state"] for e in log.interrupts(b_id)]
        self.assertEqual(states[:3], [1, 3, 1], states)  # pending, snoozed, pending
        self.assertEqual([e["state"] for e in log.interrupts(a_id)][-2:], [2, 5])
        self.assertEqual(c.shutdown(), 0)


if __name__ == "__main__":
    ss.INFER = sys.argv.pop(1)
    unittest.main(verbosity=2)
