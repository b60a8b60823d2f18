#!/usr/bin/env python3
"""The real `infer --serve` process driven through the reference client (docs/PROTOCOL.md): the
handshake, turns, sampling, interrupts, input while streaming, bad frames, the end of input.
serve_context_test.py has the context and ordering rules.

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

import serve_support as ss
from serve_support import (ic, fixture, vocab_dir, golden, serve_argv, run_generation, reason,
                           next_event, TIMEOUT)


class Serve(ss.ServeCase):
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

    def test_system_turn_opens_every_context(self):
        # --system "You are terse." is <bos><|turn>system\nYou are terse.<turn|>\n: 10 ids of the
        # chat fixture's case 1, counted in STATS and back after a RESET.
        d = vocab_dir()
        c = self.start(d, "--system", "You are terse.")
        self.assertEqual(c.stats()["pos"], 10)
        pos, n = c.append_text("<|turn>user\nhi<turn|>\n<|turn>model\n")
        self.assertEqual((pos, n), (19, 9))
        tokens, done = run_generation(c, max_tokens=3)
        self.assertEqual(len(tokens), 3)
        self.assertEqual(tokens[0]["pos"], 19)
        c.reset()
        self.assertEqual(c.stats()["pos"], 10)
        tokens, done = run_generation(c, max_tokens=2)  # the system turn alone is a context
        self.assertEqual(tokens[0]["pos"], 10)
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
    ss.INFER = sys.argv.pop(1)
    unittest.main(verbosity=2)
