"""The reference client's tool frames (PROTOCOL.md 4.20-4.27), run by test_codec.py: the
decoder refuses broken tool frames, and Client against a fake server on pipes declares tools,
opens and drives a PTY, answers TOOL_CALLs (by a handler, and by hand from tool_calls) while a
generation waits for them, receives TOOL_EVENTs apart from the answers, and sees refusals as
ServerError."""

import json
import os
import struct
import threading

import infer_client as ic


def tool_self_checks():
    """Payloads the decoder must refuse (ProtocolError), and one it must read."""
    head = struct.pack("<IIQQQQ", 1, 0, 0, 0, 0, 0)
    bad = [
        (0x8205, struct.pack("<I", 5)),                                  # no such kind
        (0x8205, struct.pack("<IIII", 3, 1, 0, 0)),                      # PTY state 0
        (0x8205, struct.pack("<IIII", 3, 1, 1, 0) + b"x"),               # one byte too many
        (0x8205, struct.pack("<IIQQI", 2, 1, 0, 0, 9) + b"ab"),          # raw past the end
        (0x8205, struct.pack("<IIIIIIIQQI", 4, 1, 6, 1, 1, 0, 0, 0, 0, 0)[:44]),  # state 6
        (0x8202, struct.pack("<II", 1, 3) + b"a b{}"),                   # not a tool name
        (0x8202, struct.pack("<II", 1, 1) + b"x[]"),                     # arguments not an object
        (0x8202, struct.pack("<II", 1, 1) + b"x" + b"[" * 65 + b"]" * 65),
        (0x8204, head + struct.pack("<III", 0, 0, 3) + b"ab"),          # partial line past the end
        (0x0208, struct.pack("<III", 1, 0, 0)),                          # action 0
        (0x0208, struct.pack("<III", 1, 1, 5)),                          # a delay with ack
        (0x0203, struct.pack("<HHII", 0, 80, 0, 0) + b"sh"),             # 0 rows
        (0x0203, struct.pack("<HHII", 24, 80, 0, 0) + b"\0sh"),          # no program
        (0x0201, struct.pack("<II", 1, 0) + b"{"),                       # not JSON
        (0x0201, struct.pack("<II", 1, 0) + b"NaN"),                     # not RFC 8259
        (0x0201, struct.pack("<II", 1, 2) + b"{}"),                      # status 2
        (0x0202, struct.pack("<I", 0x10)),
        (0x0209, struct.pack("<I", 1)),                                  # nothing to raise
        (0x8206, struct.pack("<II", 1, 2)),
    ]
    for op, payload in bad:
        try:
            ic.decode_payload(op, payload)
        except ic.ProtocolError:
            continue
        raise AssertionError("0x%04x %r decoded" % (op, payload))
    msg = ic.decode_payload(0x0203, struct.pack("<HHII", 24, 80, 0, 1) + b"d" + b"sh\0\0-c")
    assert msg["argv"] == ["sh", "", "-c"] and msg["cwd"] == "d", msg
    assert ic.json_depth('["[[", {"a": "\\"{"}]') == 2


class FakeToolServer(threading.Thread):
    """Answers HELLO and the tool frames; a GENERATE sends a TOKEN, a TOOL_CALL per name in
    self.calls and waits for each result before its DONE."""

    def __init__(self, rfd, wfd):
        super().__init__(daemon=True)
        self.r, self.w = os.fdopen(rfd, "rb", buffering=0), os.fdopen(wfd, "wb", buffering=0)
        self.lock = threading.Lock()
        self.results = {}  # call id -> TOOL_RESULT message
        self.got_result = threading.Condition(self.lock)
        self.calls = []
        self.received = []

    def put(self, op, rid, fields=None):
        data = ic.encode_frame(op, rid, fields)
        with self.lock:
            self.w.write(data)

    def generation(self, rid):
        self.put("TOKEN", rid, {"id": 7, "index": 0, "pos": 3, "text": "x"})
        for call_id, (name, args) in enumerate(self.calls, 1):
            self.put("TOOL_CALL", rid, {"call_id": call_id, "name": name,
                                        "arguments": json.dumps(args)})
            with self.got_result:
                if not self.got_result.wait_for(lambda: call_id in self.results, timeout=10):
                    break
            self.put("TOOL_EVENT", rid, {"kind": 1, "call_id": call_id, "status": 0,
                                         "elapsed_ms": 1, "pos": 4, "n_tokens": 2, "client": 1,
                                         "name": name})
        self.put("DONE", rid, {"reason": 3, "n_tokens": 1, "pos": 4, "last_id": 7, "text": ""})

    def run(self):
        dec = ic.FrameDecoder()
        while True:
            chunk = self.r.read(4096)
            if not chunk:
                return
            for _, op, flags, rid, payload in dec.feed(chunk):
                msg = ic.decode_payload(op, payload, flags)
                self.received.append(msg)
                name = msg["op"]
                if name == "HELLO":
                    self.put("SERVER_HELLO", rid, {
                        "version": 1, "vocab_size": 1000, "max_payload_bytes": 1 << 20,
                        "max_generate_tokens": 500, "context_tokens": 64, "end_ids": [1],
                        "model_name": "fake"})
                elif name == "TOOL_DECLARE":
                    self.put("TOOL_DECLARED", rid, {"n_tools": len(json.loads(msg["json"]))})
                elif name == "PTY_OPEN":  # an event ahead of the answer, on the same id
                    self.put("TOOL_EVENT", rid, {"kind": 2, "pty_id": 3, "raw_from": 0,
                                                 "text_from": 0, "raw": b"$ \x1b[0m", "text": b""})
                    self.put("PTY_OPENED", rid, {"pty_id": 3, "pid": 4242})
                elif name == "PTY_READ":
                    self.put("PTY_DATA", rid, {"pty_id": 3, "view": 1, "from": 0, "next": 3,
                                               "end": 3, "skipped": 0, "state": 1, "code": 0,
                                               "partial_line": b"$ ", "data": b"hi\n"})
                elif name == "INTERRUPT_ACTION" and msg["interrupt_id"] == 10:
                    self.put("ERROR", rid, {"code": 4, "opcode": op,
                                            "message": "interrupt 10 was dropped already"})
                elif name == "INTERRUPT_RAISE":
                    self.put("INTERRUPT_RAISED", rid, {"interrupt_id": msg["channel"] + 100})
                elif name == "TOOL_RESULT":
                    self.put("TOOL_ACK", rid)
                    with self.got_result:
                        self.results[msg["call_id"]] = msg
                        self.got_result.notify_all()
                elif name == "GENERATE":
                    threading.Thread(target=self.generation, args=(rid,), daemon=True).start()
                elif name == "SHUTDOWN":
                    self.put("SHUTDOWN_ACK", rid)
                    self.w.close()
                    return
                elif name in ("TOOL_EVENTS", "PTY_WRITE", "PTY_RESIZE", "PTY_CLOSE",
                              "INTERRUPT_ACTION"):
                    self.put("TOOL_ACK", rid)


def tool_client_checks():
    c2s_r, c2s_w = os.pipe()
    s2c_r, s2c_w = os.pipe()
    server = FakeToolServer(c2s_r, s2c_w)
    server.start()
    client = ic.Client(stdin=os.fdopen(c2s_w, "wb"), stdout=os.fdopen(s2c_r, "rb"),
                       tool_handlers={"add": lambda a: a["x"] + a["y"],
                                      "fail": lambda a: 1 // 0})
    tools = [{"name": "add", "description": "x + y", "parameters": {
        "type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}},
        {"name": "fail"}, {"name": "ask"}]
    assert client.declare_tools(tools) == 3
    assert json.loads(server.received[-1]["json"]) == tools
    client.tool_watch(("pty_output", "interrupt"))
    assert server.received[-1]["mask"] == 0b1010, server.received[-1]
    assert client.pty_open(["bash", "-i"], rows=30, cols=100, cwd="w") == (3, 4242)
    opened = server.received[-1]
    assert (opened["argv"], opened["rows"], opened["cols"], opened["cwd"]) == \
        (["bash", "-i"], 30, 100, "w"), opened
    event = client.tool_events.get(timeout=10)  # not taken for PTY_OPEN's answer
    assert event["kind"] == 2 and event["raw"] == b"$ \x1b[0m", event
    client.pty_key(3, "ctrl-c")
    client.pty_write(3, "ls\r")
    assert (server.received[-2]["mode"], server.received[-2]["data"]) == (1, b"ctrl-c")
    assert (server.received[-1]["mode"], server.received[-1]["data"]) == (0, b"ls\r")
    client.pty_resize(3, 40, 120)
    data = client.pty_read(3, view="text", start=0)
    assert (data["data"], data["partial_line"], ic.PTY_STATES[data["state"]]) == \
        (b"hi\n", b"$ ", "exited"), data
    client.pty_close(3)
    assert client.raise_interrupt(5, "build finished \u2713") == 105
    assert server.received[-1]["text"] == "build finished \u2713", server.received[-1]
    client.interrupt_action(9, "snooze", snooze_ms=1500)
    assert server.received[-1]["action"] == 2 and server.received[-1]["snooze_ms"] == 1500
    try:
        client.interrupt_action(10, "ack")
        raise AssertionError("a refused INTERRUPT_ACTION raised nothing")
    except ic.ServerError as e:
        assert ic.ERRORS[e.code] == "OUT_OF_ORDER", e
    # A generation that calls three tools: two answered by handlers, one by hand.
    server.calls = [("add", {"x": 2, "y": 3}), ("fail", {}), ("ask", {"q": "?"})]
    seen = []
    for msg in client.generate(max_tokens=5):
        seen.append(msg["op"])
        if msg["op"] == "TOKEN":
            call = client.tool_calls.get(timeout=10)  # "ask" has no handler
            assert call["name"] == "ask" and json.loads(call["arguments"]) == {"q": "?"}, call
            client.tool_result(call["call_id"], {"answer": "\u00e9"})
    assert seen == ["TOKEN", "DONE"], seen  # TOOL_CALL and TOOL_EVENT are not the stream's
    results = server.results
    assert (results[1]["status"], json.loads(results[1]["text"])) == (0, 5), results[1]
    assert results[2]["status"] == 1 and "ZeroDivisionError" in results[2]["text"], results[2]
    assert json.loads(results[3]["text"]) == {"answer": "\u00e9"}, results[3]
    ran = [client.tool_events.get(timeout=10) for _ in range(3)]
    assert [e["call_id"] for e in ran] == [1, 2, 3] and ran[0]["name"] == "add", ran
    client.shutdown(timeout=10)
    server.join(10)
    assert not server.is_alive()
