#!/usr/bin/env python3
"""Checks infer_client.py's codec against frames written by the C++ encoder.

Usage: test_codec.py FRAMES.bin FRAMES.txt
FRAMES.txt has one line per frame in the canonical form of test/protocol/python_codec_test.cpp:
  NAME rid=N field=value ...   (fields in wire order; integers decimal, f32/f64 as bit patterns in
  hex, text as hex bytes, id lists decimal). Each frame must decode to its line (whole, one byte at
  a time and in uneven chunks) and re-encode to exactly its bytes. Exit status 0 only if all do.
"""

import os
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import infer_client as ic  # noqa: E402
from test_tool_frames import tool_client_checks, tool_self_checks  # noqa: E402


def render_field(field, code, v):
    if code == "f":
        return "%s=f32:%08x" % (field, struct.unpack("<I", struct.pack("<f", v))[0])
    if code == "d":
        return "%s=f64:%016x" % (field, struct.unpack("<Q", struct.pack("<d", v))[0])
    if code == "preview":
        return "%s=s:%s" % (field, v.encode("utf-8").hex())
    return "%s=%d" % (field, v)


def render(rid, msg, op):
    name, fixed, tail = ic.LAYOUTS[op]
    return " ".join(["%s rid=%d" % (name, rid)] + render_fields(msg, fixed, tail))


def render_fields(msg, fixed, tail):
    parts = []
    for field, code in fixed:
        parts.append(render_field(field, code, msg[field]))
    for item in tail:
        kind, field = item.split(":")[:2]
        if kind in ("text", "lstr", "bytes", "lbytes"):
            value = msg[field]
            parts.append("%s=s:%s" % (field, (value.encode("utf-8") if isinstance(value, str)
                                              else value).hex()))
        elif kind == "argv":
            parts.append("%s=argv:%s" % (field, ",".join(a.encode("utf-8").hex()
                                                         for a in msg[field])))
        elif kind == "event":
            parts += render_fields(msg, *ic.EVENT_LAYOUTS[msg[field]])
        elif kind == "records":
            layout = ic.RECORDS[item.split(":")[2]]
            recs = [",".join(render_field(f, c, r[f]) for f, c in layout) for r in msg[field]]
            parts.append("%s=recs:%s" % (field, "|".join(recs)))
        else:
            parts.append("%s=ids:%s" % (field, ",".join(str(i) for i in msg[field])))
    return parts


def frames_of(data, chunks):
    dec = ic.FrameDecoder()
    events = []
    at = 0
    for n in chunks:
        events += dec.feed(data[at:at + n])
        at += n
    events += dec.feed(data[at:])
    if not dec.at_boundary():
        raise ic.ProtocolError("input ended inside a frame")
    return events


def self_checks():
    """The Python decoder's own framing rules (PROTOCOL.md section 2): oversized payloads are
    reported and skipped, and the next frame is read."""
    dec = ic.FrameDecoder(max_payload_bytes=8)
    data = ic.HEADER.pack(9, 0x0002, 0, 5) + b"x" * 9 + ic.encode_frame("INTERRUPT", 6)
    events = [e for b in data for e in dec.feed(bytes([b]))]
    assert [e[0] for e in events] == ["too_large", "frame"], events
    assert events[0][3] == 5 and events[1][3] == 6, events
    assert dec.at_boundary()
    bad_list = struct.pack("<II", 1, 1) + b"\0" * 40 + struct.pack("<I", 97) + b"a" * 97
    for bad_op, payload in ((0x0005, b"\0"), (0x0002, b"\xc3"), (0x1234, b""), (0x8003, b"\0" * 27),
                            (0x0102, b"\0" * 4), (0x0104, struct.pack("<I", 2)),
                            (0x0103, struct.pack("<II", 0, 4097)), (0x8101, struct.pack("<I", 2)),
                            (0x8104, struct.pack("<IQQIfff", 5, 0, 0, 0, 0, 0, 0)),
                            (0x8103, bad_list), (0x8100, struct.pack("<I", 1) + b"\0" * 27)):
        try:
            ic.decode_payload(bad_op, payload)
        except ic.ProtocolError:
            continue
        raise AssertionError("0x%04x %r decoded" % (bad_op, payload))
    pieces = ic.split_text("ab\u00e9\U0001F600z", 4)
    assert pieces == [b"ab\xc3\xa9", b"\xf0\x9f\x98\x80", b"z"], pieces


class FakeServer(threading.Thread):
    """Just enough of a server, on pipes, to drive Client: streams tokens slowly until told to
    stop, and answers STATS and INTERRUPT while it streams (what the real server must do too)."""

    def __init__(self, rfd, wfd):
        super().__init__(daemon=True)
        self.r, self.w = os.fdopen(rfd, "rb", buffering=0), os.fdopen(wfd, "wb", buffering=0)
        self.interrupted = threading.Event()
        self.lock = threading.Lock()

    def put(self, op, rid, fields=None):
        with self.lock:
            self.w.write(ic.encode_frame(op, rid, fields))

    def stream(self, rid, max_tokens):
        n = 0
        while n < max_tokens and not self.interrupted.is_set():
            self.put("TOKEN", rid, {"id": 100 + n, "index": n, "pos": 10 + n, "text": "t%d " % n})
            n += 1
            time.sleep(0.01)
        reason = 4 if self.interrupted.is_set() else 3
        self.put("DONE", rid, {"reason": reason, "n_tokens": n, "pos": 10 + n,
                               "last_id": 100 + n - 1 if n else 0xFFFFFFFF, "text": ""})

    def run(self):
        dec = ic.FrameDecoder()
        while True:
            chunk = self.r.read(4096)
            if not chunk:
                break
            for _, op, flags, rid, payload in dec.feed(chunk):
                msg = ic.decode_payload(op, payload, flags)
                name = msg["op"]
                if name == "HELLO":
                    self.put("SERVER_HELLO", rid, {
                        "version": 1, "vocab_size": 1000, "max_payload_bytes": 8,
                        "max_generate_tokens": 500, "context_tokens": 64, "end_ids": [1],
                        "model_name": "fake"})
                elif name in ("APPEND_TEXT", "APPEND_IDS"):
                    n = len(msg.get("ids", msg.get("text", "")))
                    self.put("APPENDED", rid, {"pos": 10, "n_tokens": n})
                elif name == "GENERATE":
                    self.interrupted.clear()
                    threading.Thread(target=self.stream, args=(rid, msg["max_tokens"]),
                                     daemon=True).start()
                elif name == "INTERRUPT":
                    self.interrupted.set()
                elif name == "STATS_REQUEST":
                    self.put("STATS", rid, dict((f, 0) for f, _ in ic.LAYOUTS[0x8005][1]))
                elif name == "MEMORY_STORE":  # the event before the answer, both with its rid
                    self.put("MEMORY_EVENT", rid, {"kind": 1, "episode_id": 4, "pos0": 0,
                                                   "n_tokens": 3, "score": 0.0,
                                                   "association": 0.0, "strength": 1.0})
                    self.put("MEMORY_STORED", rid, {"episodes": [
                        {"episode_id": 4, "pos0": 0, "n_tokens": 3}]})
                elif name == "SHUTDOWN":
                    self.put("SHUTDOWN_ACK", rid)
                    self.w.close()
                    return


def client_checks():
    """Client against FakeServer: handshake, text split to the server's 8-byte limit, a
    generation interrupted mid-stream while STATS is asked in between, a MEMORY_EVENT arriving
    ahead of its request's answer (delivered to memory_events, not taken for the answer), then
    shutdown."""
    c2s_r, c2s_w = os.pipe()
    s2c_r, s2c_w = os.pipe()
    server = FakeServer(c2s_r, s2c_w)
    server.start()
    client = ic.Client(stdin=os.fdopen(c2s_w, "wb"), stdout=os.fdopen(s2c_r, "rb"))
    assert client.hello["model_name"] == "fake", client.hello
    pos, n = client.append_text("h\u00e9llo w\u00f6rld!")  # 15 bytes: pieces of <= 8 bytes
    assert n == len("h\u00e9llo w\u00f6rld!"), n
    got = []
    for ev in client.generate(max_tokens=400, temperature=0.5, top_k=5, top_p=0.9, seed=3):
        got.append(ev)
        if len(got) == 3:
            assert client.stats()["op"] == "STATS"  # answered while tokens stream
            client.interrupt()
    done = got[-1]
    assert done["op"] == "DONE" and ic.DONE_REASONS[done["reason"]] == "interrupted", done
    assert 3 <= done["n_tokens"] < 400, done
    assert [e["index"] for e in got[:-1]] == list(range(len(got) - 1))
    seen = []
    client.on_memory_event = seen.append
    stored = client.memory_store()  # its MEMORY_EVENT is not taken for the answer
    assert stored == [{"episode_id": 4, "pos0": 0, "n_tokens": 3}], stored
    event = client.memory_events.get(timeout=10)
    assert event["op"] == "MEMORY_EVENT" and event["episode_id"] == 4, event
    assert seen == [event], seen
    client.shutdown(timeout=10)
    server.join(10)
    assert not server.is_alive()


def main():
    data = open(sys.argv[1], "rb").read()
    want = [l for l in open(sys.argv[2], encoding="utf-8").read().split("\n") if l]
    failures = []
    whole = frames_of(data, [])
    for chunks in ([1] * len(data), [3, 7, 1, 30, 2] * (len(data) // 43 + 1)):
        if frames_of(data, chunks) != whole:
            failures.append("chunked decoding differs from whole decoding")
    if len(whole) != len(want):
        failures.append("%d frames, %d lines" % (len(whole), len(want)))
    at = 0
    for i, ev in enumerate(whole):
        kind, op, flags, rid, payload = ev
        raw = data[at:at + ic.HEADER_BYTES + len(payload)]
        at += len(raw)
        if kind != "frame":
            failures.append("frame %d: %s" % (i, kind))
            continue
        try:
            msg = ic.decode_payload(op, payload, flags)
        except ic.ProtocolError as e:
            failures.append("frame %d: %s" % (i, e))
            continue
        line = render(rid, msg, op)
        if i < len(want) and line != want[i]:
            failures.append("frame %d decodes to\n  %s\nC++ says\n  %s" % (i, line, want[i]))
        again = ic.encode_frame(op, rid, msg)
        if again != raw:
            failures.append("frame %d re-encodes to\n  %s\nC++ wrote\n  %s"
                            % (i, again.hex(), raw.hex()))
    for check in (self_checks, client_checks, tool_self_checks, tool_client_checks):
        try:
            check()
        except Exception as e:  # noqa: BLE001 -- any failure of a check is reported
            failures.append("%s: %r" % (check.__name__, e))
    for f in failures:
        print("test_codec.py: " + f, file=sys.stderr)
    print("test_codec.py: %d frames, %d failures" % (len(whole), len(failures)), file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
