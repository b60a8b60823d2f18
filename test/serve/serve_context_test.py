#!/usr/bin/env python3
"""`infer --serve` against docs/PROTOCOL.md's context and ordering rules: the KV ring by default and
its switches, a fixed cache's refusals, answers in arrival order, every token of the context sent
(stress of stops, interrupts and the gate), a closed stdout ending the process.

usage: serve_context_test.py INFER [unittest args]; fixtures as serve_test.py takes them."""

import os
import subprocess
import sys
import unittest

import serve_support as ss
from serve_support import ic, fixture, golden, run_generation, reason, TIMEOUT


class ServeContext(ss.ServeCase):
    def test_the_ring_is_the_default_and_its_switches_apply(self):
        """§4.6: context_tokens states what is held; the ring's switches reach the session and
        give the tokens the CLI gives with the same switches; the stream outlives the cache."""
        prompt = golden(fixture("e2b-mini"))["prompt_ids"]
        c = self.start(fixture("e2b-mini"))
        self.assertEqual(c.hello["context_tokens"], 32 + 512 + 96)
        self.assertEqual(c.shutdown(), 0)
        small = ("--anchors", "8", "--window", "64", "--recall", "0")
        c = self.start(fixture("e2b-mini"), *small)
        self.assertEqual(c.hello["context_tokens"], 72)
        c.append_ids(prompt)
        tokens, done = run_generation(c, max_tokens=100, stop_at_eot=False)
        self.assertEqual(done["pos"], len(prompt) + 100)  # past 72: the ring evicts, never fills
        st = c.stats()
        self.assertEqual((st["pos"], st["kv_tokens"]), (len(prompt) + 100, 72))
        ids = [t["id"] for t in tokens]
        self.assertEqual(ids, self.cli_ids(fixture("e2b-mini"), prompt, 100, *small))
        exact = self.cli_ids(fixture("e2b-mini"), prompt, 100, "--no-ring")
        self.assertEqual(ids[:72 - len(prompt)], exact[:72 - len(prompt)])  # exact while it fits
        self.assertNotEqual(ids, exact)  # and evicting after
        self.assertEqual(c.shutdown(), 0)

    def test_a_fixed_cache_refuses_what_does_not_fit_with_the_frames_error(self):
        """§4.13, §5: with --no-ring an append past the cache is ERROR CONTEXT_FULL carrying the
        frame's request id and opcode, nothing appended, no APPENDED; a generation at the end
        stops with `limit`; an append refused into an empty context leaves GENERATE BAD_VALUE."""
        c = self.start(fixture("e2b-mini"), "--no-ring")
        cap = c.hello["context_tokens"]
        self.assertEqual(cap, 8192)
        self.assertEqual(c.hello["max_generate_tokens"], cap)
        big = [3] * (cap + 1)
        with self.assertRaises(ic.ServerError) as refused:
            c.append_ids(big)
        # (the client routes an ERROR to the request whose id it carries: with id 0 this waits)
        self.assertEqual((ic.ERRORS[refused.exception.code], refused.exception.opcode),
                         ("CONTEXT_FULL", ic.OPCODES["APPEND_IDS"]))
        self.assertEqual(c.stats()["pos"], 0)
        with self.assertRaises(ic.ServerError) as empty:
            list(c.generate(max_tokens=2))
        self.assertEqual(ic.ERRORS[empty.exception.code], "BAD_VALUE")
        pos, n = c.append_ids([3] * (cap - 2))
        self.assertEqual((pos, n), (cap - 2, cap - 2))
        tokens, done = run_generation(c, max_tokens=10, stop_at_eot=False)
        self.assertEqual(reason(done), "limit")
        self.assertEqual(done["pos"], tokens[-1]["pos"] + 1)
        with self.assertRaises(ic.ServerError) as full:
            c.append_ids([3, 3, 3])
        self.assertEqual(ic.ERRORS[full.exception.code], "CONTEXT_FULL")
        self.assertTrue(c.events.empty())  # no stray APPENDED
        self.assertEqual(c.stats()["pos"], done["pos"])
        c.reset()
        self.assertEqual(c.append_ids([3, 4])[0], 2)
        self.assertEqual(c.shutdown(), 0)

    def test_answers_come_in_the_order_of_their_frames(self):
        """§8: APPEND_IDS, STATS, TRACE_MARK, STATS in one write while idle: APPENDED, STATS,
        TRACE_MARK_ACK, STATS, whatever the prefill takes."""
        p = self.raw_server()
        p.stdin.write(ic.encode_frame("HELLO", 1, {"version": 1, "client_name": ""}) +
                      ic.encode_frame("APPEND_IDS", 2, {"ids": [3] * 6000}) +
                      ic.encode_frame("STATS_REQUEST", 3) +
                      ic.encode_frame("TRACE_MARK", 4, {"label": "m"}) +
                      ic.encode_frame("STATS_REQUEST", 5) +
                      ic.encode_frame("SHUTDOWN", 6))
        p.stdin.flush()
        msgs = self.read_all(p)
        self.assertEqual(p.wait(TIMEOUT), 0)
        self.assertEqual([(m["op"], m["rid"]) for m in msgs],
                         [("SERVER_HELLO", 1), ("APPENDED", 2), ("STATS", 3),
                          ("TRACE_MARK_ACK", 4), ("STATS", 5), ("SHUTDOWN_ACK", 6)])
        self.assertEqual(msgs[2]["pos"], 6000)

    def test_every_token_in_the_context_was_sent_under_stops_and_interrupts(self):
        """§4.4: 200 generations ended at random points by a stop id, an end id, INTERRUPT or
        the token limit: each DONE pos is the last TOKEN's pos + 1, and the next greedy
        continuation equals the one of the same stream built explicitly from the TOKENs."""
        import random
        rng = random.Random(26)
        prompt = golden(fixture("e2b-mini"))["prompt_ids"]
        c = self.start(fixture("e2b-mini"))
        end_ids = c.hello["end_ids"]
        for rep in range(200):
            c.reset()
            stream = prompt[:rng.randint(1, len(prompt))]
            c.append_ids(stream)
            ref, _ = run_generation(c, max_tokens=24, stop_at_eot=False)
            c.reset()
            c.append_ids(stream)
            how = rng.choice(["stop_id", "interrupt", "limit", "eos"])
            kw = {"max_tokens": rng.randint(1, 24), "stop_at_eot": how == "eos"}
            if how == "stop_id":
                kw["stop_ids"] = [ref[rng.randrange(len(ref))]["id"]]
            if how == "interrupt":
                kw["max_tokens"] = 400
            tokens, done = [], None
            at = rng.randint(0, 6)
            if how == "interrupt" and at == 0:
                c.interrupt()
            for msg in c.generate(**kw):
                if msg["op"] == "TOKEN":
                    tokens.append(msg)
                    if how == "interrupt" and len(tokens) == at:
                        c.interrupt()
                elif msg["op"] == "DONE":
                    done = msg
            where = "rep %d (%s, %s)" % (rep, how, kw)
            last = tokens[-1]["pos"] + 1 if tokens else len(stream)
            self.assertEqual(done["pos"], last, where)
            self.assertEqual(done["n_tokens"], len(tokens), where)
            self.assertEqual(c.stats()["pos"], done["pos"], where)
            if how == "eos":
                self.assertTrue(reason(done) == "limit" or tokens[-1]["id"] in end_ids, where)
            live, _ = run_generation(c, max_tokens=4, stop_at_eot=False)
            c.reset()
            c.append_ids(stream + [t["id"] for t in tokens])
            explicit, _ = run_generation(c, max_tokens=4, stop_at_eot=False)
            self.assertEqual([t["id"] for t in live], [t["id"] for t in explicit], where)
        self.assertEqual(c.shutdown(), 0)

    def test_every_token_in_the_context_was_sent_when_the_gate_stops(self):
        """§4.4: the gate's lead (4 tokens) stays in the context and is sent: DONE pos is the
        last TOKEN's pos + 1 and the continuation equals the explicit stream's."""
        import random
        rng = random.Random(27)
        prompt = golden(fixture("e2b-mini"))["prompt_ids"]
        c = self.start(fixture("e2b-mini"), "--gate-top-prob", "0.9")
        gated = 0
        for rep in range(50):
            c.reset()
            stream = prompt[:rng.randint(1, len(prompt))]
            c.append_ids(stream)
            tokens, done = run_generation(c, max_tokens=64, stop_at_eot=False, gated=True)
            gated += reason(done) == "gate"
            last = tokens[-1]["pos"] + 1 if tokens else len(stream)
            self.assertEqual(done["pos"], last, "rep %d" % rep)
            live, _ = run_generation(c, max_tokens=4, stop_at_eot=False)
            c.reset()
            c.append_ids(stream + [t["id"] for t in tokens])
            explicit, _ = run_generation(c, max_tokens=4, stop_at_eot=False)
            self.assertEqual([t["id"] for t in live], [t["id"] for t in explicit], "rep %d" % rep)
        self.assertGreater(gated, 0, "the gate never stopped a generation: the test proves nothing")
        self.assertEqual(c.shutdown(), 0)

    def closed_stdout_ends_the_process(self, generating):
        """§7.5: the client closes the pipe it reads (stdin stays open): the server must notice
        and exit by itself, not wait in read(stdin) for a frame or EOF that never comes."""
        p = self.raw_server()
        p.stdin.write(ic.encode_frame("HELLO", 1, {"version": 1, "client_name": ""}) +
                      ic.encode_frame("APPEND_IDS", 2, {"ids": [1, 2, 3]}))
        want = "APPENDED"
        if generating:
            gen = {"max_tokens": 0, "flags": 0, "seed": 0, "temperature": 0.0, "top_p": 1.0,
                   "top_k": 0, "stop_ids": []}
            p.stdin.write(ic.encode_frame("GENERATE", 3, gen))
            want = "TOKEN"
        p.stdin.flush()
        decoder, seen = ic.FrameDecoder(), []
        while want not in seen:
            data = os.read(p.stdout.fileno(), 65536)
            self.assertTrue(data, "the server closed its output first")
            seen += [ic.LAYOUTS[ev[1]][0] for ev in decoder.feed(data)]
        p.stdout.close()
        try:
            p.wait(5)  # within a second asked; 5 leaves a loaded machine room
        except subprocess.TimeoutExpired:
            self.fail("the server still runs 5 s after its stdout closed (stdin open)")
        self.assertEqual(p.returncode, 0)

    def test_closed_stdout_ends_an_idle_server(self):
        self.closed_stdout_ends_the_process(generating=False)

    def test_closed_stdout_ends_a_generating_server(self):
        self.closed_stdout_ends_the_process(generating=True)


if __name__ == "__main__":
    ss.INFER = sys.argv.pop(1)
    unittest.main(verbosity=2)
