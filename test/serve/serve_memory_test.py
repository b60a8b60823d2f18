#!/usr/bin/env python3
"""`infer --serve --memory` driven through the reference client (docs/PROTOCOL.md 4.14-4.19):
MEMORY_STORE makes episodes of the window, MEMORY_QUERY lists them with previews of their text,
MEMORY_RECALL of an excerpt recalls its episode first (its query joining the conversation),
MEMORY_FORGET removes one (an unknown id is BAD_VALUE), and with MEMORY_WATCH on each of these
arrives as a MEMORY_EVENT carrying the request id of its frame (a GENERATE's for its automatic
recall); a full store reports the episode it replaced. Without --memory every frame of the range is NOT_AVAILABLE; malformed memory frames get
an ERROR and the session goes on; frames sent during a generation are answered after its DONE;
RESET keeps the store; the episodes are in the file after SHUTDOWN.

usage: serve_memory_test.py INFER [unittest args]; e2b-vocab from INFER_SHARED_FIXTURES."""

import os
import queue
import random
import struct
import subprocess
import sys
import tempfile
import unittest

import serve_support as ss
from serve_support import ic, vocab_dir, serve_argv, run_generation, next_event, TIMEOUT

WORDS = ("apple river stone cloud window garden music paper silver dragon forest ocean "
         "mountain candle letter bridge").split()
EPISODE = 32
RING = ["--anchors", "4", "--window", "256", "--recall", "64", "--episode-tokens", str(EPISODE)]


def words(seed, n):
    rng = random.Random(seed)
    return [rng.choice(WORDS) for _ in range(n)]


def drain(q):
    out = []
    while True:
        try:
            out.append(q.get(timeout=0.5))
        except queue.Empty:
            return out


def kinds(events):
    return [(ic.MEMORY_EVENT_KINDS[e["kind"]], e["episode_id"], e["rid"]) for e in events]


class ServeMemory(ss.ServeCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.mem = os.path.join(self.dir.name, "serve.mem")

    def start_memory(self, *extra):
        return self.start(vocab_dir(), "--memory", self.mem, *RING, *extra)

    def test_store_query_recall_forget_each_with_its_event(self):
        c = self.start_memory()
        c.memory_watch(True)
        text = words(1, 200)
        pos, n = c.append_text(" ".join(text))
        self.assertEqual(pos, n)

        # STORE: whole episodes of 32 tokens and the partial rest, in position order.
        store_rid = 0
        stored = c.memory_store()
        self.assertEqual([e["pos0"] for e in stored], list(range(0, pos, EPISODE)))
        self.assertEqual(sum(e["n_tokens"] for e in stored), pos)
        ids = [e["episode_id"] for e in stored]
        events = drain(c.memory_events)
        self.assertEqual([k[:2] for k in kinds(events)], [("stored", i) for i in ids])
        store_rid = events[0]["rid"]
        self.assertNotEqual(store_rid, 0)
        self.assertEqual({e["rid"] for e in events}, {store_rid})
        self.assertEqual(c.memory_store(), [])  # the same tokens are never stored twice
        self.assertEqual(c.stats()["prefill_tokens"], pos)  # the store read the last one

        # QUERY: every episode with a preview of its text, pages included.
        listed = c.memory_list()
        self.assertEqual([e["episode_id"] for e in listed], ids)
        self.assertTrue(" ".join(text).startswith(listed[0]["preview"].strip()), listed[0])
        for e in listed:
            self.assertTrue(e["preview"], e)
            self.assertLessEqual(len(e["preview"].encode()), ic.MAX_PREVIEW_BYTES)
            self.assertIn(e["preview"], " ".join(text))
            self.assertGreater(e["written_ms"], 0)
            self.assertEqual(e["recalled_ms"], 0)
        page = c.memory_query(2, 3)
        self.assertEqual(page["total"], len(ids))
        self.assertEqual([e["episode_id"] for e in page["episodes"]], ids[2:5])

        # RECALL: an excerpt of the third episode's text brings that episode back first. The
        # query joins the conversation (STATS pos grows by its tokens).
        before = c.stats()
        excerpt = " ".join(text[70:90])
        recalled = c.memory_recall(excerpt)
        self.assertGreaterEqual(len(recalled), 1, recalled)
        best = recalled[0]
        self.assertEqual(best["episode_id"], ids[2], recalled)
        self.assertTrue(-1.0 <= best["association"] <= 1.0, best)
        self.assertGreater(best["association"], 0.2, best)
        self.assertGreater(best["strength"], 1.0, best)  # a recall strengthens
        self.assertEqual(best["n_tokens"], EPISODE)
        scores = [e["score"] for e in recalled]
        self.assertEqual(scores, sorted(scores, reverse=True))
        after = c.stats()
        self.assertGreater(after["pos"], before["pos"])
        self.assertEqual(after["prefill_tokens"] - before["prefill_tokens"],
                         after["pos"] - before["pos"])
        events = drain(c.memory_events)
        self.assertEqual([k[0] for k in kinds(events)], ["recalled"] * len(recalled))
        self.assertEqual(events[0]["episode_id"], best["episode_id"])
        self.assertAlmostEqual(events[0]["score"], best["score"], places=5)
        self.assertNotIn(events[0]["rid"], (0, store_rid))
        listed = {e["episode_id"]: e for e in c.memory_list()}
        self.assertGreater(listed[best["episode_id"]]["recalled_ms"], 0)

        # A GENERATE recalls on its own from what was appended since: its event names it.
        c.append_text(" " + " ".join(text[140:160]))
        rid = next(c._ids) + 1  # generate() takes the next id after this one
        tokens, done = run_generation(c, max_tokens=2, stop_at_eot=False)
        self.assertEqual(done["n_tokens"], 2)
        auto = drain(c.memory_events)
        self.assertTrue(auto, "no event for the GENERATE's automatic recall")
        self.assertEqual({(ic.MEMORY_EVENT_KINDS[e["kind"]], e["rid"]) for e in auto},
                         {("recalled", rid)})

        # FORGET: gone from the list; an unknown id is BAD_VALUE and changes nothing.
        self.assertEqual(c.memory_forget(ids[0]), ids[0])
        events = drain(c.memory_events)
        self.assertEqual([k[:2] for k in kinds(events)], [("forgotten", ids[0])])
        with self.assertRaises(ic.ServerError) as e:
            c.memory_forget(10 ** 12)
        self.assertEqual(ic.ERRORS[e.exception.code], "BAD_VALUE")
        self.assertEqual(e.exception.opcode, 0x0102)
        self.assertEqual([e["episode_id"] for e in c.memory_list()], ids[1:])

        # RESET forgets the conversation, not the store.
        c.reset()
        self.assertEqual(c.stats()["pos"], 0)
        self.assertEqual(c.memory_query(0, 0)["total"], len(ids) - 1)
        c.memory_watch(False)
        # 33 tokens: one whole episode and a tail of one token, shorter than an episode key's
        # sub-spans (it once aborted the server).
        c.append_ids(list(range(1000, 1033)))
        self.assertEqual([e["n_tokens"] for e in c.memory_store()], [EPISODE, 1])
        self.assertEqual(drain(c.memory_events), [])
        self.assertEqual(c.shutdown(), 0)

        # The file holds them (SHUTDOWN waited for what was being written).
        p = subprocess.run([ss.INFER, "--memory", self.mem, "--mem-list"], capture_output=True,
                           text=True, timeout=TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stderr)
        # All but the forgotten one, and the two stored after the reset.
        self.assertIn(": %d of 64 episodes" % (len(ids) - 1 + 2), p.stdout)
        self.assertNotIn("\n%d  pos " % ids[0], "\n" + p.stdout)
        self.assertIn("\n%d  pos " % ids[1], "\n" + p.stdout)

    def test_a_full_store_reports_the_episode_it_replaced(self):
        c = self.start_memory("--mem-capacity", "2")
        c.memory_watch(True)
        c.append_ids(list(range(1000, 1000 + 3 * EPISODE)))
        stored = c.memory_store()
        self.assertEqual([e["n_tokens"] for e in stored[-1:]], [EPISODE])
        events = kinds(drain(c.memory_events))
        self.assertEqual([k[0] for k in events], ["stored", "stored", "replaced", "stored"])
        replaced = events[2][1]
        self.assertIn(replaced, (events[0][1], events[1][1]))
        listed = [e["episode_id"] for e in c.memory_list()]
        self.assertEqual(len(listed), 2)
        self.assertNotIn(replaced, listed)
        self.assertIn(events[3][1], listed)
        self.assertEqual(c.shutdown(), 0)

    def test_without_memory_every_frame_of_the_range_is_not_available(self):
        c = self.start(vocab_dir(), *RING)
        calls = [lambda: c.memory_recall("x"), c.memory_store, lambda: c.memory_forget(1),
                 c.memory_query, c.memory_watch]
        for call, op in zip(calls, range(0x0100, 0x0105)):
            with self.assertRaises(ic.ServerError) as e:
                call()
            self.assertEqual(ic.ERRORS[e.exception.code], "NOT_AVAILABLE")
            self.assertEqual(e.exception.opcode, op)
            self.assertIn("--memory", e.exception.message)
        self.assertEqual(c.stats()["pos"], 0)  # the query of a refused recall joined nothing
        self.assertEqual(c.shutdown(), 0)

    def test_malformed_memory_frames_get_errors_and_the_session_goes_on(self):
        c = self.start_memory()
        bad = [(0x0102, b"\1\2\3\4", "MALFORMED"),          # FORGET: 4 bytes, not 8
               (0x0101, b"\0", "MALFORMED"),                # STORE: not empty
               (0x0100, b"\xc3\x28", "MALFORMED"),          # RECALL: invalid UTF-8
               (0x0103, struct.pack("<II", 0, 4097), "BAD_VALUE"),
               (0x0104, struct.pack("<I", 2), "BAD_VALUE"),
               (0x0105, b"", "NOT_AVAILABLE"),              # not defined in the range
               (0x8101, struct.pack("<I", 0), "UNKNOWN_OPCODE")]
        for i, (op, payload, code) in enumerate(bad):
            c.send_raw(ic.HEADER.pack(len(payload), op, 0, 700 + i) + payload)
            e = next_event(c)
            self.assertEqual((e["op"], ic.ERRORS.get(e["code"]), e["rid"], e["opcode"]),
                             ("ERROR", code, 700 + i, op), e)
        self.assertEqual(c.memory_query()["total"], 0)
        self.assertEqual(c.stats()["pos"], 0)
        self.assertEqual(c.shutdown(), 0)

    def test_frames_sent_during_a_generation_are_answered_after_its_done(self):
        p = subprocess.Popen(serve_argv(vocab_dir(), "--memory", self.mem, *RING),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.addCleanup(self._stop, type("C", (), {"proc": p})())
        gen = {"max_tokens": 24, "flags": 0, "seed": 0, "temperature": 0.0, "top_p": 1.0,
               "top_k": 0, "stop_ids": []}
        p.stdin.write(ic.encode_frame("HELLO", 1, {"version": 1, "client_name": "t"}) +
                      ic.encode_frame("APPEND_TEXT", 2, {"text": " ".join(words(3, 50))}) +
                      ic.encode_frame("GENERATE", 3, gen) +
                      ic.encode_frame("MEMORY_STORE", 4) +
                      ic.encode_frame("MEMORY_QUERY", 5, {"first": 0, "max_count": 10}) +
                      ic.encode_frame("SHUTDOWN", 6))
        p.stdin.flush()
        msgs = self.read_all(p)
        self.assertEqual(p.wait(TIMEOUT), 0)
        order = [(m["op"], m["rid"]) for m in msgs if m["op"] != "TOKEN"]
        self.assertEqual(order, [("SERVER_HELLO", 1), ("APPENDED", 2), ("DONE", 3),
                                 ("MEMORY_STORED", 4), ("MEMORY_LIST", 5), ("SHUTDOWN_ACK", 6)])
        stored = msgs[[m["op"] for m in msgs].index("MEMORY_STORED")]["episodes"]
        listed = msgs[[m["op"] for m in msgs].index("MEMORY_LIST")]
        # SHUTDOWN interrupted the generation; the STORE queued behind it still stored every
        # token of the context, the appended text and whatever was generated.
        done = msgs[[m["op"] for m in msgs].index("DONE")]
        self.assertEqual(ic.DONE_REASONS[done["reason"]], "interrupted")
        self.assertEqual(sum(e["n_tokens"] for e in stored), done["pos"])
        self.assertEqual(listed["total"], len(stored))


if __name__ == "__main__":
    ss.INFER = sys.argv.pop(1)
    unittest.main(verbosity=2)
