#!/usr/bin/env python3
"""The real `infer --serve` process driven through the reference client (docs/PROTOCOL.md).

usage: serve_test.py INFER [unittest args]; fixtures from INFER_TEST_FIXTURES (the small id-only
models) and INFER_SHARED_FIXTURES (e2b-vocab, with a tokenizer). Standard library only; no timing
assertions beyond generous timeouts."""

import json
import os
import queue
import struct
import subprocess
import sys
import tempfile
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


class Serve(unittest.TestCase):
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

    def test_handshake_and_shutdown(self):
        c = self.start()
        h = c.hello
        with open(os.path.join(fixture("e2b-mini"), "config.json")) as f:
            cfg = json.load(f)
        vocab = cfg.get("text_config", cfg)["vocab_size"]
        self.assertEqual(h["version"], 1)
        self.assertEqual(h["vocab_size"], vocab)
        self.assertEqual(h["max_payload_bytes"], ic.MAX_PAYLOAD_BYTES)
        self.assertGreater(h["max_generate_tokens"], 0)
        self.assertGreater(h["context_tokens"], 0)
        self.assertEqual(h["model_name"], "e2b-mini")
        ack = c.trace_mark("t0")
        self.assertEqual(ack["label"], "t0")
        self.assertEqual(c.shutdown(), 0)

    def test_multi_turn_greedy_matches_golden_and_positions_continue(self):
        d = fixture("e2b-mini")
        g = golden(d)
        prompt = g["prompt_ids"]
        c = self.start(d)
        pos, n = c.append_ids(prompt)
        self.assertEqual((pos, n), (len(prompt), len(prompt)))
        want = self.expected_greedy(g, c.hello["end_ids"], 16)
        tokens, done = run_generation(c, max_tokens=16)
        self.assertEqual([t["id"] for t in tokens], want)
        self.assertEqual([t["index"] for t in tokens], list(range(len(want))))
        self.assertEqual([t["pos"] for t in tokens], [len(prompt) + i for i in range(len(want))])
        self.assertEqual(reason(done), "limit" if len(want) == 16 else "eos")
        self.assertEqual(done["n_tokens"], len(want))
        self.assertEqual(done["pos"], len(prompt) + len(want))
        self.assertEqual(done["last_id"], want[-1])
        # Turn 2 continues from DONE.pos; its tokens equal a fresh session fed the whole context.
        extra = prompt[:5]
        pos2, _ = c.append_ids(extra)
        self.assertEqual(pos2, done["pos"] + len(extra))
        tokens2, done2 = run_generation(c, max_tokens=8)
        self.assertTrue(tokens2)
        self.assertEqual(tokens2[0]["pos"], pos2)
        st = c.stats()
        self.assertEqual(st["pos"], done2["pos"])
        self.assertEqual(st["generations"], 2)
        self.assertEqual(st["flags"], 0)
        self.assertEqual(c.shutdown(), 0)

        fresh = self.start(d)
        fresh.append_ids(prompt + want + extra)
        tokens3, _ = run_generation(fresh, max_tokens=8)
        self.assertEqual([t["id"] for t in tokens3], [t["id"] for t in tokens2])
        self.assertEqual([t["pos"] for t in tokens3], [t["pos"] for t in tokens2])
        self.assertEqual(fresh.shutdown(), 0)

    def test_trace_marks_land_in_the_trace_file(self):
        # --serve --trace: the session's spans, and each TRACE_MARK as an instant event on io.
        d = fixture("e2b-mini")
        g = golden(d)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            c = self.start(d, "--trace", path)
            c.trace_mark("before")
            c.append_ids(g["prompt_ids"])
            run_generation(c, max_tokens=4)
            c.trace_mark("after")
            self.assertEqual(c.shutdown(), 0)
            with open(path) as f:
                events = json.load(f)
        marks = [e for e in events if e.get("ph") == "i"]
        self.assertEqual([e["name"] for e in marks], ["before", "after"])
        self.assertLess(marks[0]["ts"], marks[1]["ts"])
        tokens = [e for e in events if e.get("ph") == "X" and e.get("cat") == "stream"
                  and e.get("name") == "token"]
        self.assertGreaterEqual(len(tokens), 4)
        self.assertTrue(all(marks[0]["ts"] <= t["ts"] <= marks[1]["ts"] for t in tokens))

    def test_generate_applies_its_own_sampling(self):
        # Without STOP_AT_EOT every run takes its 16 tokens, end ids included.
        # The session is greedy (--temperature 0); a GENERATE with its own temperature and seed
        # samples (same seed, same context: same tokens; another seed: others), and the next
        # GENERATE asking for the server's settings is greedy again.
        d = fixture("e2b-mini")
        g = golden(d)
        c = self.start(d)
        want = self.expected_greedy(g, c.hello["end_ids"], 16)
        runs = {}
        for name, kw in (("a", dict(temperature=2.0, seed=7)), ("b", dict(temperature=2.0, seed=7)),
                         ("c", dict(temperature=2.0, seed=8)), ("greedy", {})):
            c.reset()
            c.append_ids(g["prompt_ids"])
            tokens, _ = run_generation(c, max_tokens=16, stop_at_eot=False, **kw)
            runs[name] = [t["id"] for t in tokens]
        self.assertEqual(runs["a"], runs["b"])
        self.assertNotEqual(runs["a"], runs["c"])
        self.assertNotEqual(runs["a"], want[:len(runs["a"])])
        self.assertEqual(runs["greedy"][:len(want)], want)  # end ids do not stop it here
        self.assertEqual(c.shutdown(), 0)

    def test_stop_id_ends_the_generation(self):
        d = fixture("e2b-mini")
        g = golden(d)
        c = self.start(d)
        c.append_ids(g["prompt_ids"])
        want = self.expected_greedy(g, c.hello["end_ids"], 16)
        k = next(i for i, t in enumerate(want) if want.index(t) == i and i >= 2)
        tokens, done = run_generation(c, max_tokens=16, stop_ids=[want[k]])
        self.assertEqual([t["id"] for t in tokens], want[:k + 1])
        self.assertEqual((reason(done), done["n_tokens"], done["last_id"]),
                         ("stop_id", k + 1, want[k]))
        # The engine stops at the stop id: nothing past it is computed or left in the context.
        self.assertEqual(done["pos"], len(g["prompt_ids"]) + k + 1)
        self.assertEqual(c.stats()["pos"], done["pos"])
        self.assertEqual(c.shutdown(), 0)

    def test_gate_stops_only_a_gated_generation(self):
        # --gate-entropy 0: every step's entropy is above it, so the gate says stop_and_listen.
        d = fixture("e2b-mini")
        c = self.start(d, "--gate-entropy", "0")
        c.append_ids(golden(d)["prompt_ids"])
        for gated in (False, True):
            msgs = list(c.generate(max_tokens=16, stop_at_eot=False, gated=gated))
            tokens = [m for m in msgs if m["op"] == "TOKEN"]
            gates = [ic.GATE_DECISIONS[m["decision"]] for m in msgs if m["op"] == "GATE"]
            self.assertTrue(gates)
            self.assertEqual(set(gates), {"stop_and_listen"})
            if gated:  # ends within the stream's lead over the gate (4 tokens)
                self.assertEqual(reason(msgs[-1]), "gate")
                self.assertTrue(1 <= len(tokens) <= 5, len(tokens))
            else:  # reported, not obeyed
                self.assertEqual(reason(msgs[-1]), "limit")
                self.assertEqual(len(tokens), 16)
        self.assertEqual(c.shutdown(), 0)

    def test_text_turn_on_e2b_vocab_matches_golden_text(self):
        d = vocab_dir()
        p = golden(d)["prompts"][0]
        c = self.start(d)
        # §4.6: <eos> and <turn|> end a turn; <|turn> (105) starts one and is no end id.
        self.assertEqual(c.hello["end_ids"], [1, 106])
        pos, n = c.append_text("<bos>" + p["text"])
        self.assertEqual((pos, n), (len(p["ids"]), len(p["ids"])))
        tokens, done = run_generation(c, max_tokens=16)
        self.assertEqual([t["id"] for t in tokens], p["greedy_tokens"])
        self.assertEqual("".join(t["text"] for t in tokens) + done["text"], p["greedy_text"])
        self.assertEqual(c.shutdown(), 0)

    def test_interrupt_mid_generation_then_continue(self):
        c = self.start(fixture("e2b-mini"), "-n", "4000")
        prompt = golden(fixture("e2b-mini"))["prompt_ids"]
        c.append_ids(prompt)
        tokens, done = [], None
        for msg in c.generate(max_tokens=4000, stop_at_eot=False):
            if msg["op"] == "TOKEN":
                tokens.append(msg)
                if len(tokens) == 3:
                    c.interrupt()
            elif msg["op"] == "DONE":
                done = msg
        self.assertEqual(reason(done), "interrupted")
        self.assertLess(len(tokens), 4000)
        self.assertEqual(done["n_tokens"], len(tokens))
        self.assertEqual(done["pos"], tokens[-1]["pos"] + 1)  # every token in the context was sent
        self.assertEqual(c.stats()["pos"], done["pos"])
        pos, _ = c.append_ids([prompt[0]])
        self.assertEqual(pos, done["pos"] + 1)  # positions keep counting
        tokens2, done2 = run_generation(c, max_tokens=4)
        self.assertEqual(tokens2[0]["pos"], pos)
        self.assertIn(reason(done2), ("limit", "eos"))
        c.interrupt()  # idle: ignored, no answer
        self.assertEqual(c.stats()["pos"], done2["pos"])
        self.assertTrue(c.events.empty())
        self.assertEqual(c.shutdown(), 0)

    def test_input_and_stats_while_tokens_stream(self):
        c = self.start(fixture("e2b-mini"), "-n", "4000")
        prompt = golden(fixture("e2b-mini"))["prompt_ids"]
        c.append_ids(prompt)
        stream = c.generate(max_tokens=4000, stop_at_eot=False)
        first = next(stream)
        self.assertEqual(first["op"], "TOKEN")
        c.append_ids([prompt[1], prompt[2]], wait=False)  # queued: APPENDED comes after DONE
        c.send("APPEND_TEXT", {"text": b""})               # likewise (ids-only model: empty text)
        st = c.stats()  # answered at once, between tokens
        self.assertEqual(st["flags"] & 1, 1)
        self.assertEqual(st["queued_appends"], 2)
        self.assertGreater(st["pos"], len(prompt))
        c.interrupt()
        done = None
        for msg in stream:
            if msg["op"] == "DONE":
                done = msg
        self.assertEqual(reason(done), "interrupted")
        a1, a2 = next_event(c), next_event(c)  # unrouted: the APPENDEDs, in order, after DONE
        self.assertEqual((a1["op"], a1["pos"], a1["n_tokens"]), ("APPENDED", done["pos"] + 2, 2))
        self.assertEqual((a2["op"], a2["pos"], a2["n_tokens"]), ("APPENDED", done["pos"] + 2, 0))
        self.assertEqual(c.stats()["pos"], done["pos"] + 2)
        self.assertEqual(c.shutdown(), 0)

    def test_reset_while_generating(self):
        c = self.start(fixture("e2b-mini"), "-n", "4000")
        prompt = golden(fixture("e2b-mini"))["prompt_ids"]
        c.append_ids(prompt)
        stream = c.generate(max_tokens=4000, stop_at_eot=False)
        self.assertEqual(next(stream)["op"], "TOKEN")
        c.append_ids([prompt[0]], wait=False)
        rid = c.send("RESET")  # unrouted: its RESET_ACK goes to events
        done = [m for m in stream if m["op"] == "DONE"][0]
        self.assertEqual(reason(done), "interrupted")
        self.assertEqual(next_event(c)["op"], "APPENDED")
        ack = next_event(c)
        self.assertEqual((ack["op"], ack["rid"]), ("RESET_ACK", rid))
        self.assertEqual(c.stats()["pos"], 0)
        pos, _ = c.append_ids(prompt)
        self.assertEqual(pos, len(prompt))
        tokens, _ = run_generation(c, max_tokens=16)
        g = golden(fixture("e2b-mini"))
        self.assertEqual([t["id"] for t in tokens], self.expected_greedy(g, c.hello["end_ids"], 16))
        self.assertEqual(c.shutdown(), 0)

    def expect_error(self, c, code, rid, opcode):
        e = next_event(c)
        self.assertEqual(e["op"], "ERROR", e)
        self.assertEqual((ic.ERRORS[e["code"]], e["rid"], e["opcode"]), (code, rid, opcode), e)
        return e

    def test_bad_frames_get_errors_and_the_session_continues(self):
        c = self.start()
        vocab = c.hello["vocab_size"]
        # unknown opcode
        c.send_raw(ic.HEADER.pack(3, 0x0042, 0, 901) + b"abc")
        self.expect_error(c, "UNKNOWN_OPCODE", 901, 0x0042)
        # a server -> client opcode
        c.send_raw(ic.HEADER.pack(0, 0x8002, 0, 902))
        self.expect_error(c, "UNKNOWN_OPCODE", 902, 0x8002)
        # reserved (memory) range
        c.send_raw(ic.HEADER.pack(0, 0x0101, 0, 903))
        self.expect_error(c, "NOT_AVAILABLE", 903, 0x0101)
        # garbage payload: GENERATE one byte short, APPEND_IDS not a multiple of 4, bad UTF-8
        c.send_raw(ic.HEADER.pack(31, 0x0004, 0, 904) + b"\xff" * 31)
        self.expect_error(c, "MALFORMED", 904, 0x0004)
        c.send_raw(ic.HEADER.pack(5, 0x0003, 0, 905) + b"\x01\x02\x03\x04\x05")
        self.expect_error(c, "MALFORMED", 905, 0x0003)
        c.send_raw(ic.HEADER.pack(2, 0x0002, 0, 906) + b"\xc3\x28")
        self.expect_error(c, "MALFORMED", 906, 0x0002)
        # non-zero header flags
        c.send_raw(ic.HEADER.pack(0, 0x0006, 1, 907))
        self.expect_error(c, "MALFORMED", 907, 0x0006)
        # id out of range: nothing appended
        c.send_raw(ic.encode_frame("APPEND_IDS", 908, {"ids": [1, vocab]}))
        self.expect_error(c, "ID_OUT_OF_RANGE", 908, 0x0003)
        # GENERATE on an empty context
        c.send_raw(ic.encode_frame("GENERATE", 909, {"max_tokens": 2, "flags": 3, "seed": 0,
                                                     "temperature": 0.0, "top_p": 1.0,
                                                     "top_k": 0, "stop_ids": []}))
        self.expect_error(c, "BAD_VALUE", 909, 0x0004)
        # oversized: the error comes from the header alone; the payload is skipped
        big = ic.MAX_PAYLOAD_BYTES + 1
        c.send_raw(ic.HEADER.pack(big, 0x0002, 0, 910))
        self.expect_error(c, "FRAME_TOO_LARGE", 910, 0x0002)
        c.send_raw(b"\0" * big)
        # a second HELLO
        c.send_raw(ic.encode_frame("HELLO", 911, {"version": 1, "client_name": ""}))
        self.expect_error(c, "OUT_OF_ORDER", 911, 0x0001)
        # still serving
        self.assertEqual(c.stats()["pos"], 0)
        self.assertEqual(c.append_ids([1, 2, 3]), (3, 3))
        tokens, done = run_generation(c, max_tokens=2)
        self.assertEqual(done["pos"], 3 + len(tokens))
        # GENERATE while generating: OUT_OF_ORDER, the running one goes on
        stream = c.generate(max_tokens=4000, stop_at_eot=False)
        self.assertEqual(next(stream)["op"], "TOKEN")
        c.send_raw(ic.encode_frame("GENERATE", 912, {"max_tokens": 2, "flags": 3, "seed": 0,
                                                     "temperature": 0.0, "top_p": 1.0,
                                                     "top_k": 0, "stop_ids": []}))
        self.expect_error(c, "OUT_OF_ORDER", 912, 0x0004)
        c.interrupt()
        self.assertEqual(reason([m for m in stream if m["op"] == "DONE"][0]), "interrupted")
        self.assertTrue(c.events.empty())
        self.assertEqual(c.shutdown(), 0)

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

    def test_frames_before_hello_are_out_of_order_then_hello_works_and_eof_exits_0(self):
        p = self.raw_server()
        gen = {"max_tokens": 2, "flags": 3, "seed": 0, "temperature": 0.0, "top_p": 1.0,
               "top_k": 0, "stop_ids": []}
        p.stdin.write(ic.encode_frame("GENERATE", 1, gen) +
                      ic.encode_frame("APPEND_IDS", 2, {"ids": [1]}) +
                      ic.encode_frame("HELLO", 3, {"version": 1, "client_name": "t"}) +
                      ic.encode_frame("APPEND_IDS", 4, {"ids": [1, 2]}))
        p.stdin.close()  # EOF right after: a clean shutdown, no SHUTDOWN_ACK
        msgs = self.read_all(p)
        self.assertEqual(p.wait(TIMEOUT), 0)
        self.assertEqual([(m["op"], m["rid"]) for m in msgs],
                         [("ERROR", 1), ("ERROR", 2), ("SERVER_HELLO", 3), ("APPENDED", 4)])
        self.assertEqual(ic.ERRORS[msgs[0]["code"]], "OUT_OF_ORDER")
        self.assertEqual(ic.ERRORS[msgs[1]["code"]], "OUT_OF_ORDER")

    def test_eof_inside_a_frame_is_truncated_then_exit_0(self):
        p = self.raw_server()
        p.stdin.write(ic.encode_frame("HELLO", 1, {"version": 1, "client_name": ""}) +
                      ic.HEADER.pack(8, 0x0003, 0, 2) + b"\x01\x00")
        p.stdin.close()
        msgs = self.read_all(p)
        self.assertEqual(p.wait(TIMEOUT), 0)
        self.assertEqual([m["op"] for m in msgs], ["SERVER_HELLO", "ERROR"])
        self.assertEqual((ic.ERRORS[msgs[1]["code"]], msgs[1]["rid"]), ("TRUNCATED", 0))

    def test_eof_while_generating_exits_0(self):
        c = self.start(fixture("e2b-mini"), "-n", "4000")
        c.append_ids([1, 2, 3])
        stream = c.generate(max_tokens=4000, stop_at_eot=False)
        self.assertEqual(next(stream)["op"], "TOKEN")
        self.assertEqual(c.close(TIMEOUT), 0)

    def cli_ids(self, model, prompt, n, *extra):
        out = subprocess.run([INFER, "--model", model, "--prompt-ids", ",".join(map(str, prompt)),
                              "--output", "ids", "-n", str(n), "--temperature", "0",
                              "--threads", "2"] + list(extra),
                             stdout=subprocess.PIPE, check=True, timeout=TIMEOUT).stdout
        return [int(x) for x in out.split()]

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

    def test_version_mismatch_ends_the_session_with_status_1(self):
        p = self.raw_server()
        p.stdin.write(ic.encode_frame("HELLO", 7, {"version": 2, "client_name": ""}) +
                      ic.encode_frame("STATS_REQUEST", 8))
        p.stdin.flush()
        msgs = self.read_all(p)
        self.assertEqual(p.wait(TIMEOUT), 1)
        self.assertEqual([m["op"] for m in msgs], ["ERROR", "SHUTDOWN_ACK"])
        self.assertEqual((ic.ERRORS[msgs[0]["code"]], msgs[0]["rid"]), ("VERSION_MISMATCH", 7))


if __name__ == "__main__":
    INFER = sys.argv.pop(1)
    unittest.main(verbosity=2)
