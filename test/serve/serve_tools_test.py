#!/usr/bin/env python3
"""The tool frames over the real `infer --serve` (docs/PROTOCOL.md 4.20-4.29) through the
reference client. Without --tools: every client method of the range raises ServerError
NOT_AVAILABLE with the frame's opcode, a malformed tool frame too (its payload is not read), and
the session goes on (a generation afterwards, no TOOL_CALL or TOOL_EVENT ever sent). With
--tools ROOT: the frames' answers and errors (declarations, results for calls never sent,
interrupts raised, acted on and done, their --trace spans), an interrupt acked while idle
opening the next generation as its first TOKENs, the built-in declarations in the system turn
with --system or without, and a PTY's life cycle (open, write, read both views, resize, a named
key, close, a program that exits, unknown ids) with no child left at the end.

usage: serve_tools_test.py INFER [unittest args]; fixtures as serve_test.py."""

import json
import os
import sys
import tempfile
import time
import unittest

import serve_support as ss
from serve_support import ic, run_generation, next_event


class ServeTools(ss.ServeCase):
    def test_without_tools_every_tool_frame_is_not_available_and_the_session_goes_on(self):
        c = self.start()
        calls = [
            ("TOOL_DECLARE", lambda: c.declare_tools([{"name": "get_weather"}])),
            ("TOOL_RESULT", lambda: c.tool_result(1, {"ok": True})),
            ("TOOL_EVENTS", lambda: c.tool_watch()),
            ("PTY_OPEN", lambda: c.pty_open(["bash"])),
            ("PTY_WRITE", lambda: c.pty_write(1, "ls\r")),
            ("PTY_WRITE", lambda: c.pty_key(1, "ctrl-c")),
            ("PTY_RESIZE", lambda: c.pty_resize(1, 40, 100)),
            ("PTY_CLOSE", lambda: c.pty_close(1)),
            ("PTY_READ", lambda: c.pty_read(1)),
            ("INTERRUPT_ACTION", lambda: c.interrupt_action(1, "snooze", 100)),
            ("INTERRUPT_RAISE", lambda: c.raise_interrupt(1, "the build finished")),
        ]
        for name, call in calls:
            with self.assertRaises(ic.ServerError, msg=name) as e:
                call()
            self.assertEqual(ic.ERRORS[e.exception.code], "NOT_AVAILABLE", name)
            self.assertEqual(e.exception.opcode, ic.OPCODES[name])
            self.assertIn("--tools", e.exception.message)
        # Malformed or undefined: NOT_AVAILABLE all the same, the payload unread.
        for rid, (op, payload) in enumerate([(0x0200, b"[{"), (0x0206, b"x"), (0x02FF, b"")], 950):
            c.send_raw(ic.HEADER.pack(len(payload), op, 0, rid) + payload)
            e = next_event(c)
            self.assertEqual((e["op"], ic.ERRORS[e["code"]], e["rid"], e["opcode"]),
                             ("ERROR", "NOT_AVAILABLE", rid, op), e)
        c.append_ids([2, 105, 236])
        tokens, done = run_generation(c, max_tokens=3, stop_at_eot=False)
        self.assertEqual((len(tokens), ic.DONE_REASONS[done["reason"]]), (3, "limit"))
        self.assertTrue(c.tool_calls.empty() and c.tool_events.empty())
        self.assertEqual(c.shutdown(), 0)


WAIT_S = 30  # every wait below is bounded by this


def gone(pid):
    """Whether process `pid` is gone (reaped: not even a zombie), waiting up to WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if not os.path.exists("/proc/%d" % pid):
            return True
        time.sleep(0.02)
    return False


class ServeWithTools(ss.ServeCase):
    def start_tools(self, *extra):
        self.root = tempfile.mkdtemp(prefix="infer-tools-")
        return self.start(ss.vocab_dir(), "--tools", self.root, *extra)

    def refused(self, code, call):
        with self.assertRaises(ic.ServerError) as e:
            call()
        self.assertEqual(ic.ERRORS[e.exception.code], code, e.exception.message)
        return e.exception.message

    def read_until(self, c, pty, view, text):
        """PTY_READs the view from 0 until it holds `text` (bounded); returns the PTY_DATA."""
        deadline = time.monotonic() + WAIT_S
        while True:
            d = c.pty_read(pty, view)
            if text in d["data"] or time.monotonic() > deadline:
                return d
            time.sleep(0.02)

    def test_the_frames_answer_and_refuse_as_the_spec_says(self):
        trace = os.path.join(tempfile.mkdtemp(prefix="infer-trace-"), "trace.json")
        c = self.start_tools("--trace", trace)
        c.tool_watch(("interrupt",))
        tool = {"name": "get_weather", "description": "Weather now",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
        self.assertEqual(c.declare_tools([tool, {"name": "ping"}]), 2)
        self.assertIn("built-in", self.refused("BAD_VALUE", lambda: c.declare_tools(
            [{"name": "read_file"}])))
        self.refused("BAD_VALUE", lambda: c.declare_tools([{"name": "a"}, {"name": "a"}]))
        self.assertEqual(c.declare_tools([]), 0)
        # No TOOL_CALL was ever sent: every call id is unknown, whatever the status.
        self.assertIn("never sent", self.refused("BAD_VALUE", lambda: c.tool_result(1, {"t": 1})))
        self.refused("BAD_VALUE", lambda: c.tool_result(7, error="no such city"))
        # A client event: pending, then dropped by this request; done, so acting again is
        # OUT_OF_ORDER, and an id never given is BAD_VALUE.
        iid = c.raise_interrupt(3, "the build finished")
        self.assertEqual(c.raise_interrupt(3, " and the tests"), iid)  # coalesced
        c.interrupt_action(iid, "drop")
        self.refused("OUT_OF_ORDER", lambda: c.interrupt_action(iid, "ack"))
        self.refused("BAD_VALUE", lambda: c.interrupt_action(iid + 100, "ack"))
        seen = []
        deadline = time.monotonic() + WAIT_S
        while len(seen) < 2 and time.monotonic() < deadline:
            seen.append(c.tool_events.get(timeout=WAIT_S))
        self.assertEqual([(e["interrupt_id"], e["state"], e["source"], e["source_id"])
                          for e in seen], [(iid, 1, 3, 3), (iid, 4, 3, 3)])
        self.assertEqual(seen[0]["rid"], 0)  # a new interrupt is background work
        self.assertNotEqual(seen[1]["rid"], 0)  # the INTERRUPT_ACTION that dropped it
        self.assertEqual(seen[1]["bytes"], len("the build finished and the tests"))
        # A new event on the channel is a new interrupt.
        self.assertGreater(c.raise_interrupt(3, "again"), iid)
        self.assertEqual(c.shutdown(), 0)
        # --trace: every transition is an instant span on the "interrupts" track.
        with open(trace) as f:
            events = json.load(f)
        events = events["traceEvents"] if isinstance(events, dict) else events
        spans = [(e["name"], e["args"]["arg"]) for e in events
                 if e.get("cat") == "interrupts" and e.get("ph") == "X"]
        self.assertEqual(spans[:2], [("raised", iid), ("dropped", iid)])

    def test_an_interrupt_acked_while_idle_opens_the_next_generation(self):
        c = self.start_tools()
        c.tool_watch(("interrupt",))
        iid = c.raise_interrupt(9, "DELTA_READY")
        c.interrupt_action(iid, "ack")
        # Acked and waiting for a boundary: nothing more may change it.
        self.assertIn("acked", self.refused("OUT_OF_ORDER", lambda: c.interrupt_action(iid, "drop")))
        self.refused("OUT_OF_ORDER", lambda: c.interrupt_action(iid, "ack"))
        tokens, done = ss.run_generation(c, max_tokens=4, stop_at_eot=False)
        injected = None
        deadline = time.monotonic() + WAIT_S
        while injected is None and time.monotonic() < deadline:
            e = c.tool_events.get(timeout=WAIT_S)
            if e["interrupt_id"] == iid and e["state"] == 5:
                injected = e
        self.assertIsNotNone(injected)
        n = injected["n_tokens"]
        self.assertEqual(injected["pos"], tokens[0]["pos"])  # the generation's first TOKENs
        text = "".join(t["text"] for t in tokens[:n])
        self.assertEqual(text, "<|tool_response>response:client{id:9,interrupt:%d,"
                               "text:<|\"|>DELTA_READY<|\"|>}<tool_response|>" % iid)
        self.assertEqual(len(tokens), n + 4)  # then the 4 generated ones
        self.assertEqual(done["n_tokens"], len(tokens))
        self.refused("OUT_OF_ORDER", lambda: c.interrupt_action(iid, "drop"))  # done now
        self.assertEqual(c.shutdown(), 0)

    def test_the_system_turn_declares_the_built_in_tools_with_system_or_without(self):
        root = tempfile.mkdtemp(prefix="infer-tools-")

        def opening(*extra):  # the tokens every context opens with
            c = self.start(ss.vocab_dir(), *extra)
            pos = c.stats()["pos"]
            self.assertEqual(c.shutdown(), 0)
            return pos

        system = ("--system", "You are an agent.")
        with_both, text_only = opening("--tools", root, *system), opening(*system)
        tools_only, empty = opening("--tools", root), opening("--system", "")
        # The declarations are the same tokens after the system text or after none.
        self.assertEqual(with_both - text_only, tools_only - empty)
        # The built-in declarations are about 750 tokens.
        self.assertGreater(with_both - text_only, 500)

    def test_client_tools_join_the_system_turn_from_the_next_reset(self):
        c = self.start_tools()
        builtin = c.stats()["pos"]
        tool = {"name": "get_weather", "description": "Weather of a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]}}
        self.assertEqual(c.declare_tools([tool]), 1)
        self.assertEqual(c.stats()["pos"], builtin)  # this context keeps its opening turn
        c.append_text("<|turn>user\nhi<turn|>\n")
        c.reset()
        with_client = c.stats()["pos"]
        self.assertGreater(with_client, builtin + 20)  # the declaration's tokens
        c.append_text("<|turn>user\nhi<turn|>\n")
        tokens, done = run_generation(c, max_tokens=2)  # the longer opening turn is fed
        self.assertEqual(len(tokens), 2, done)
        self.assertGreater(tokens[0]["pos"], with_client)  # after the turn and the user's
        # Withdrawn: the next context opens with the built-in declarations alone again.
        self.assertEqual(c.declare_tools([]), 0)
        c.reset()
        self.assertEqual(c.stats()["pos"], builtin)
        # A declaration that would not fit the anchors is refused and changes nothing.
        huge = {"name": "huge", "description": "x " * 2000}  # ~2,000 tokens
        self.assertIn("anchors", self.refused("BAD_VALUE", lambda: c.declare_tools([huge])))
        c.reset()
        self.assertEqual(c.stats()["pos"], builtin)
        self.assertEqual(c.shutdown(), 0)

    def test_a_pty_lives_is_read_resized_and_closed_and_no_child_is_left(self):
        c = self.start_tools()
        c.tool_watch(("pty_state",))
        pty, pid = c.pty_open(["bash", "--norc", "--noprofile"], rows=24, cols=80)
        self.assertGreater(pid, 0)
        c.pty_write(pty, "echo HELLO_$((2+3))\n")
        raw = self.read_until(c, pty, "raw", b"HELLO_5")
        self.assertIn(b"HELLO_5", raw["data"])
        self.assertEqual((raw["state"], raw["from"], raw["skipped"]), (0, 0, 0))
        text = self.read_until(c, pty, "text", b"HELLO_5\n")
        self.assertIn(b"HELLO_5\n", text["data"])
        self.assertNotIn(b"\x1b", text["data"])  # escapes stripped for the model
        # Reading from `next` gives nothing new; past the end is BAD_VALUE.
        again = c.pty_read(pty, "raw", start=raw["end"])
        self.assertEqual((again["data"], again["from"]), (b"", raw["end"]))
        self.refused("BAD_VALUE", lambda: c.pty_read(pty, "raw", start=raw["end"] + 10 ** 6))
        c.pty_resize(pty, 40, 100)
        c.pty_write(pty, "stty size\n")
        self.assertIn(b"40 100", self.read_until(c, pty, "text", b"40 100")["data"])
        self.refused("BAD_VALUE", lambda: c.pty_key(pty, "no-such-key"))
        c.pty_write(pty, "echo START_$((0+1)); sleep 100")
        c.pty_key(pty, "enter")
        self.read_until(c, pty, "text", b"START_1\n")
        time.sleep(0.3)  # the sleep is in the foreground by now
        c.pty_key(pty, "ctrl-c")  # ends the sleep: the prompt comes back
        c.pty_write(pty, "echo AFTER_$((1+1))\n")
        self.assertIn(b"AFTER_2", self.read_until(c, pty, "text", b"AFTER_2")["data"])
        c.pty_close(pty)
        e = c.tool_events.get(timeout=WAIT_S)
        self.assertEqual((e["kind"], e["pty_id"], e["state"]), (3, pty, 3))  # closed
        self.assertNotEqual(e["rid"], 0)  # caused by the PTY_CLOSE
        self.assertTrue(gone(pid), "pid %d still there after PTY_CLOSE" % pid)
        for call in (lambda: c.pty_write(pty, "x"), lambda: c.pty_read(pty),
                     lambda: c.pty_resize(pty, 10, 10), lambda: c.pty_close(pty),
                     lambda: c.pty_write(99, "x"), lambda: c.pty_close(0)):
            self.refused("BAD_VALUE", call)
        self.refused("BAD_VALUE", lambda: c.pty_open(["/no/such/program"]))
        self.refused("BAD_VALUE", lambda: c.pty_open(["sh"], cwd="../.."))

        # A program that exits: its state, its last output still readable, no terminal to type.
        done, done_pid = c.pty_open(["sh", "-c", "echo BYE; exit 3"])
        e = c.tool_events.get(timeout=WAIT_S)
        self.assertEqual((e["kind"], e["pty_id"], e["state"], e["code"]), (3, done, 1, 3))
        d = c.pty_read(done, "text")
        self.assertEqual((d["state"], d["code"]), (1, 3))
        self.assertIn(b"BYE", d["data"])
        self.refused("OUT_OF_ORDER", lambda: c.pty_write(done, "x"))
        self.assertTrue(gone(done_pid))

        # At SHUTDOWN a running program is ended and reaped before the server exits.
        _, live_pid = c.pty_open(["sleep", "1000"])
        self.assertTrue(os.path.exists("/proc/%d" % live_pid))
        self.assertEqual(c.shutdown(), 0)
        self.assertTrue(gone(live_pid), "pid %d outlived the server" % live_pid)


if __name__ == "__main__":
    ss.INFER = sys.argv.pop(1)
    unittest.main(verbosity=2)
