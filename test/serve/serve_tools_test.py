#!/usr/bin/env python3
"""The tool frames over the real `infer --serve` (docs/PROTOCOL.md 4.20-4.29) through the
reference client. Without --tools: every client method of the range raises ServerError
NOT_AVAILABLE with the frame's opcode, a malformed tool frame too (its payload is not read), and
the session goes on (a generation afterwards, no TOOL_CALL or TOOL_EVENT ever sent).

usage: serve_tools_test.py INFER [unittest args]; fixtures as serve_test.py."""

import sys
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


if __name__ == "__main__":
    ss.INFER = sys.argv.pop(1)
    unittest.main(verbosity=2)
