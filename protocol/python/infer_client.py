#!/usr/bin/env python3
"""Reference client for `infer --serve` (docs/PROTOCOL.md), standard library only.

Three layers, usable on their own:
  * the codec: encode_frame()/decode_payload() and FrameDecoder, table-driven from LAYOUTS, which
    mirrors PROTOCOL.md section 4 field by field (test_codec.py checks it against the C++ codec);
  * Client: spawns `infer --serve ...` (or wraps given pipes), does the handshake, and runs a
    reader thread so that input, interrupts and control frames can be sent while tokens stream;
  * a line-based chat CLI:
      python3 protocol/python/infer_client.py --infer build/infer -- --model DIR
"""

import argparse
import collections
import itertools
import queue
import signal
import struct
import subprocess
import sys
import threading

PROTOCOL_VERSION = 1
HEADER = struct.Struct("<IHHI")  # payload_bytes, opcode, flags, request_id
HEADER_BYTES = HEADER.size  # 12
MAX_PAYLOAD_BYTES = 1 << 20
MAX_STOP_IDS = 64
MAX_LABEL_BYTES = 1024

# GENERATE flags
GEN_DEFAULT_SAMPLING = 1 << 0
GEN_STOP_AT_EOT = 1 << 1
GEN_GATED = 1 << 2
GEN_GATE_EVENTS = 1 << 3
GEN_KNOWN_FLAGS = 0xF

ERRORS = {1: "MALFORMED", 2: "UNKNOWN_OPCODE", 3: "FRAME_TOO_LARGE", 4: "OUT_OF_ORDER",
          5: "VERSION_MISMATCH", 6: "ID_OUT_OF_RANGE", 7: "BAD_VALUE", 8: "NOT_AVAILABLE",
          9: "ENGINE", 10: "TRUNCATED"}
DONE_REASONS = {1: "eos", 2: "stop_id", 3: "limit", 4: "interrupted", 5: "gate", 6: "error"}
GATE_DECISIONS = {0: "speak", 1: "stop_and_listen", 2: "act"}

# opcode -> (name, fixed fields [(name, struct code)], tail)
# tail: None (payload ends after the fixed fields), "text:NAME" (rest is UTF-8),
# "ids:NAME" (rest is u32 ids), or "n_ids:NAME" (u32 count then ids; may be followed by text).
LAYOUTS = {
    # client -> server
    0x0001: ("HELLO", [("version", "I")], ["text:client_name"]),
    0x0002: ("APPEND_TEXT", [], ["text:text"]),
    0x0003: ("APPEND_IDS", [], ["ids:ids"]),
    0x0004: ("GENERATE", [("max_tokens", "I"), ("flags", "I"), ("seed", "Q"),
                          ("temperature", "f"), ("top_p", "f"), ("top_k", "I")],
             ["n_ids:stop_ids"]),
    0x0005: ("INTERRUPT", [], []),
    0x0006: ("STATS_REQUEST", [], []),
    0x0007: ("TRACE_MARK", [], ["text:label"]),
    0x0008: ("RESET", [], []),
    0x0009: ("SHUTDOWN", [], []),
    # server -> client
    0x8001: ("SERVER_HELLO", [("version", "I"), ("vocab_size", "I"), ("max_payload_bytes", "I"),
                              ("max_generate_tokens", "I"), ("context_tokens", "I")],
             ["n_ids:end_ids", "text:model_name"]),
    0x8002: ("TOKEN", [("id", "I"), ("index", "I"), ("pos", "Q")], ["text:text"]),
    0x8003: ("GATE", [("decision", "I"), ("index", "I"), ("entropy", "f"), ("top_prob", "f"),
                      ("eot_prob", "f"), ("urgency", "f"), ("cost_ms", "f")], []),
    0x8004: ("DONE", [("reason", "I"), ("n_tokens", "I"), ("pos", "Q"), ("last_id", "I")],
             ["text:text"]),
    0x8005: ("STATS", [("pos", "Q"), ("kv_tokens", "Q"), ("prefill_tokens", "Q"),
                       ("decode_tokens", "Q"), ("generations", "Q"), ("prefill_tok_s", "d"),
                       ("decode_tok_s", "d"), ("uptime_ms", "Q"), ("flags", "I"),
                       ("queued_appends", "I")], []),
    0x8006: ("ERROR", [("code", "H"), ("opcode", "H")], ["text:message"]),
    0x8007: ("TRACE_MARK_ACK", [("server_time_ns", "Q")], ["text:label"]),
    0x8008: ("SHUTDOWN_ACK", [], []),
    0x8009: ("APPENDED", [("pos", "Q"), ("n_tokens", "I")], []),
    0x800A: ("RESET_ACK", [], []),
}
OPCODES = {name: op for op, (name, _, _) in LAYOUTS.items()}
MEMORY_OPCODES = range(0x0100, 0x0200)  # reserved, with and without the 0x8000 direction bit
TOOLS_OPCODES = range(0x0200, 0x0300)


class ProtocolError(Exception):
    """A frame that breaks PROTOCOL.md (from the peer) or a request this client refuses."""


class ServerError(Exception):
    """An ERROR frame answering one of our requests."""

    def __init__(self, msg):
        self.code = msg["code"]
        self.opcode = msg["opcode"]
        self.message = msg["message"]
        super().__init__("%s (answering 0x%04x): %s" % (ERRORS.get(self.code, self.code),
                                                        self.opcode, self.message))


# ---- codec

def encode_payload(op, fields):
    """fields: dict with the layout's names; text fields are str or bytes, ids lists of int."""
    name, fixed, tail = LAYOUTS[op]
    out = bytearray(struct.pack("<" + "".join(code for _, code in fixed),
                                *[fields[n] for n, _ in fixed]))
    for item in tail:
        kind, field = item.split(":")
        value = fields.get(field, b"" if kind == "text" else [])
        if kind == "text":
            out += value.encode("utf-8") if isinstance(value, str) else bytes(value)
        else:
            if kind == "n_ids":
                out += struct.pack("<I", len(value))
            out += struct.pack("<%dI" % len(value), *value)
    return bytes(out)


def encode_frame(op, request_id, fields=None, flags=0):
    if isinstance(op, str):
        op = OPCODES[op]
    payload = encode_payload(op, fields or {})
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ProtocolError("%s payload of %d bytes over the %d limit"
                            % (LAYOUTS[op][0], len(payload), MAX_PAYLOAD_BYTES))
    return HEADER.pack(len(payload), op, flags, request_id) + payload


def _compile(op):
    """The layout's fixed fields as one Struct, and its tail as (kind, field) pairs."""
    name, fixed, tail = LAYOUTS[op]
    return (name, struct.Struct("<" + "".join(code for _, code in fixed)),
            tuple(n for n, _ in fixed), tuple(tuple(item.split(":")) for item in tail))


# Built once: at 10K TOKEN frames/s the client's parsing is part of what bench_serve.py times.
_COMPILED = {op: _compile(op) for op in LAYOUTS}


def decode_payload(op, payload, flags=0):
    """Payload -> dict with 'op' (the opcode's name) and the layout's fields, text fields as str
    (strict UTF-8). Raises ProtocolError for anything PROTOCOL.md section 6 calls malformed."""
    layout = _COMPILED.get(op)
    if layout is None:
        raise ProtocolError("unknown opcode 0x%04x" % op)
    name, fixed, names, tail = layout
    n_fixed = fixed.size
    if len(payload) < n_fixed or (not tail and len(payload) != n_fixed):
        raise ProtocolError("%s: payload is %d bytes, expected %s%d"
                            % (name, len(payload), "" if not tail else "at least ", n_fixed))
    if flags:
        raise ProtocolError("%s: header flags %d, v1 defines none" % (name, flags))
    msg = dict(zip(names, fixed.unpack_from(payload)))
    msg["op"] = name
    at = n_fixed
    for kind, field in tail:
        if kind == "text":
            try:
                msg[field] = bytes(payload[at:]).decode("utf-8", errors="strict")
            except UnicodeDecodeError as e:
                raise ProtocolError("%s: %s is not valid UTF-8 (%s)" % (name, field, e))
            at = len(payload)
        elif kind == "ids":
            rest = payload[at:]
            if len(rest) % 4:
                raise ProtocolError("%s: %d bytes is not a whole number of ids" % (name, len(rest)))
            msg[field] = list(struct.unpack("<%dI" % (len(rest) // 4), rest))
            at = len(payload)
        else:  # n_ids
            (n,) = struct.unpack_from("<I", payload, at)
            if n > MAX_STOP_IDS or len(payload) < at + 4 + 4 * n:
                raise ProtocolError("%s: %d ids do not fit the payload" % (name, n))
            msg[field] = list(struct.unpack_from("<%dI" % n, payload, at + 4))
            at += 4 + 4 * n
    if at != len(payload):
        raise ProtocolError("%s: %d bytes after the last field" % (name, len(payload) - at))
    if name == "DONE" or name == "GATE":
        _check_values(msg)
    return msg


def _check_values(msg):
    if msg["op"] == "DONE" and msg["reason"] not in DONE_REASONS:
        raise ProtocolError("DONE: reason %d" % msg["reason"])
    if msg["op"] == "GATE" and msg["decision"] not in GATE_DECISIONS:
        raise ProtocolError("GATE: decision %d" % msg["decision"])


class FrameDecoder:
    """Cuts a byte stream fed in chunks of any size into frames. Holds at most one header and
    one payload of at most max_payload_bytes; an oversized payload is skipped, not stored.
    feed() returns a list of events: ("frame", opcode, flags, request_id, payload) or
    ("too_large", opcode, flags, request_id, payload_bytes)."""

    def __init__(self, max_payload_bytes=MAX_PAYLOAD_BYTES):
        self.max_payload_bytes = max_payload_bytes
        self._buf = bytearray()  # the header, then the payload being collected
        self._header = None
        self._skip = 0

    def at_boundary(self):
        return self._header is None and not self._buf and self._skip == 0

    def feed(self, data):
        events = []
        buf = self._buf
        buf += data
        at = 0
        end = len(buf)
        while True:
            if self._skip:
                n = min(self._skip, end - at)
                self._skip -= n
                at += n
                if self._skip:
                    break
            if self._header is None:
                if end - at < HEADER_BYTES:
                    break
                length, op, flags, rid = HEADER.unpack_from(buf, at)
                at += HEADER_BYTES
                if length > self.max_payload_bytes:
                    events.append(("too_large", op, flags, rid, length))
                    self._skip = length
                    continue
                self._header = (length, op, flags, rid)
            length, op, flags, rid = self._header
            if end - at < length:
                break
            events.append(("frame", op, flags, rid, bytes(buf[at:at + length])))
            at += length
            self._header = None
        del buf[:at]  # what is left: part of a header or of a payload
        return events


def split_text(text, max_bytes=MAX_PAYLOAD_BYTES):
    """UTF-8 pieces of at most max_bytes, never cutting a character (one APPEND_TEXT each)."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    pieces = []
    while data:
        cut = min(len(data), max_bytes)
        while cut < len(data) and (data[cut] & 0xC0) == 0x80:
            cut -= 1
        pieces.append(data[:cut])
        data = data[cut:]
    return pieces


# ---- client

class _Inbox:
    """The messages answering one request: filled by the reader thread a batch at a time,
    read one at a time by the request's (single) consumer."""

    def __init__(self):
        self._q = queue.Queue()
        self._pending = collections.deque()

    def put_many(self, msgs):
        self._q.put(msgs)

    def get(self, timeout=None):
        if not self._pending:
            self._pending.extend(self._q.get(timeout=timeout))
        return self._pending.popleft()


class Client:
    """One session with `infer --serve`. Thread-safe senders; a reader thread routes each server
    frame to the queue of the request id it answers (unsolicited frames go to self.events)."""

    def __init__(self, argv=None, stdin=None, stdout=None, client_name="infer_client.py"):
        if argv is not None:
            # Own session: a Ctrl-C at the terminal reaches this client (which sends INTERRUPT),
            # not the server.
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         start_new_session=True)
            self._w, self._r = self.proc.stdin, self.proc.stdout
        else:
            self.proc = None
            self._w, self._r = stdin, stdout
        self._ids = itertools.count(1)
        self._send_lock = threading.Lock()
        self._routes = {}  # request id -> queue.Queue of messages
        self._routes_lock = threading.Lock()
        self.events = queue.Queue()  # frames for no pending request (request id 0, stray ids)
        self.closed = threading.Event()
        self.hello = None
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        self.hello = self._handshake(client_name)

    # -- plumbing
    def _route(self, rid):
        q = _Inbox()
        with self._routes_lock:
            self._routes[rid] = q
        return q

    def _unroute(self, rid):
        with self._routes_lock:
            self._routes.pop(rid, None)

    def send(self, op, fields=None, request_id=None):
        """Sends one frame; returns its request id."""
        rid = next(self._ids) if request_id is None else request_id
        self.send_raw(encode_frame(op, rid, fields))
        return rid

    def send_raw(self, data):
        with self._send_lock:
            self._w.write(data)
            self._w.flush()

    def _read_loop(self):
        decoder = FrameDecoder()
        try:
            while True:
                chunk = self._r.read1(65536) if hasattr(self._r, "read1") else self._r.read(4096)
                if not chunk:
                    break
                # One hand-over per route per chunk, not per frame: a thread wake-up costs more
                # than parsing a TOKEN, and the server writes whatever tokens are ready at once.
                batches = {}
                for ev in decoder.feed(chunk):
                    if ev[0] == "too_large":
                        msg = {"op": "CLIENT_ERROR", "message": "server frame too large"}
                    else:
                        _, op, flags, rid, payload = ev
                        try:
                            msg = decode_payload(op, payload, flags)
                        except ProtocolError as e:
                            msg = {"op": "CLIENT_ERROR", "message": str(e)}
                        msg["rid"] = rid
                    rid = msg.get("rid", 0)
                    if rid not in batches:
                        with self._routes_lock:
                            batches[rid] = (self._routes.get(rid), [])
                    batches[rid][1].append(msg)
                for inbox, msgs in batches.values():
                    if inbox is not None:
                        inbox.put_many(msgs)
                    else:
                        for msg in msgs:
                            self.events.put(msg)
        finally:
            self.closed.set()
            eof = {"op": "EOF"}
            with self._routes_lock:
                inboxes = list(self._routes.values())
            for inbox in inboxes:
                inbox.put_many([eof])
            self.events.put(eof)

    def _call(self, op, fields=None, want=(), timeout=60):
        """Sends a request and waits for its one answer (a name in `want`, or ERROR)."""
        rid = next(self._ids)
        q = self._route(rid)
        try:
            self.send(op, fields, rid)
            msg = q.get(timeout=timeout)
        finally:
            self._unroute(rid)
        if msg["op"] == "ERROR":
            raise ServerError(msg)
        if msg["op"] not in want:
            raise ProtocolError("expected %s, got %s" % ("/".join(want), msg))
        return msg

    def _handshake(self, client_name):
        msg = self._call("HELLO", {"version": PROTOCOL_VERSION, "client_name": client_name},
                         want=("SERVER_HELLO", "EOF"))
        if msg["op"] == "EOF":
            status = self.proc.wait(10) if self.proc is not None else None
            raise ProtocolError("the server closed its output before SERVER_HELLO (exit status %s)"
                                % status)
        return msg

    # -- requests
    def append_text(self, text, wait=True):
        """Appends text (split into frames of at most the server's max payload, on character
        boundaries). With wait, returns the last APPENDED (pos) and the total token count."""
        limit = self.hello["max_payload_bytes"]
        total, last = 0, None
        for piece in split_text(text, limit) or [b""]:
            if not wait:
                self.send("APPEND_TEXT", {"text": piece})
                continue
            last = self._call("APPEND_TEXT", {"text": piece}, want=("APPENDED",))
            total += last["n_tokens"]
        return (last["pos"], total) if wait else None

    def append_ids(self, ids, wait=True):
        limit = self.hello["max_payload_bytes"] // 4
        total, last = 0, None
        for i in range(0, max(len(ids), 1), limit):
            chunk = list(ids[i:i + limit])
            if not wait:
                self.send("APPEND_IDS", {"ids": chunk})
                continue
            last = self._call("APPEND_IDS", {"ids": chunk}, want=("APPENDED",))
            total += last["n_tokens"]
        return (last["pos"], total) if wait else None

    def generate(self, max_tokens=0, temperature=None, top_k=0, top_p=1.0, seed=0,
                 stop_ids=(), stop_at_eot=True, gated=False, gate_events=False):
        """Starts a generation; yields its TOKEN and GATE messages (dicts) and finally DONE.
        temperature None: the server's sampling settings. Raises ServerError if refused."""
        flags = (GEN_STOP_AT_EOT if stop_at_eot else 0) | (GEN_GATED if gated else 0) | \
                (GEN_GATE_EVENTS if gate_events else 0)
        if temperature is None:
            flags |= GEN_DEFAULT_SAMPLING
            temperature, top_p, top_k = 0.0, 1.0, 0
        rid = next(self._ids)
        q = self._route(rid)
        fields = {"max_tokens": max_tokens, "flags": flags, "seed": seed,
                  "temperature": temperature, "top_p": top_p, "top_k": top_k,
                  "stop_ids": list(stop_ids)}
        self.send("GENERATE", fields, rid)
        return self._stream(rid, q)

    def _stream(self, rid, q):
        try:
            while True:
                msg = q.get()
                if msg["op"] == "ERROR":
                    raise ServerError(msg)
                if msg["op"] in ("EOF", "CLIENT_ERROR"):
                    raise ProtocolError("stream ended during generation: %s" % msg)
                yield msg
                if msg["op"] == "DONE":
                    return
        finally:
            self._unroute(rid)

    def interrupt(self):
        """Asks the running generation to stop (within one token); its DONE says 'interrupted'.
        Safe to call at any time, from any thread; no answer of its own."""
        self.send("INTERRUPT")

    def stats(self):
        return self._call("STATS_REQUEST", want=("STATS",))

    def trace_mark(self, label):
        return self._call("TRACE_MARK", {"label": label}, want=("TRACE_MARK_ACK",))

    def reset(self):
        return self._call("RESET", want=("RESET_ACK",))

    def shutdown(self, timeout=30):
        """SHUTDOWN, wait for its ack (or EOF), and reap the process; returns its exit status."""
        try:
            self._call("SHUTDOWN", want=("SHUTDOWN_ACK", "EOF"), timeout=timeout)
        except (BrokenPipeError, OSError):
            pass
        return self.close(timeout)

    def close(self, timeout=30):
        try:
            self._w.close()  # EOF on the server's stdin also shuts it down cleanly
        except OSError:
            pass
        self.closed.wait(timeout)
        if self.proc is not None:
            return self.proc.wait(timeout)
        return None


# ---- CLI: a line-based chat

def _chat(args, infer_args):
    client = Client([args.infer, "--serve"] + infer_args)
    h = client.hello
    print("# %s, vocab %d, context %d tokens; each line is appended and answered; Ctrl-C "
          "interrupts; /stats /reset /quit" % (h["model_name"], h["vocab_size"], h["context_tokens"]),
          file=sys.stderr)
    try:
        for line in sys.stdin:
            line = line.rstrip("\n")
            if line == "/quit":
                break
            if line == "/stats":
                print(client.stats(), file=sys.stderr)
                continue
            if line == "/reset":
                client.reset()
                continue
            client.append_text(line + "\n")
            # Ctrl-C while tokens stream interrupts the generation (sent from another thread:
            # the handler may run while the main thread holds the send lock); the stream then
            # ends with DONE 'interrupted' and the conversation goes on.
            signal.signal(signal.SIGINT,
                          lambda *_: threading.Thread(target=client.interrupt, daemon=True).start())
            try:
                for ev in client.generate(max_tokens=args.max_tokens,
                                          temperature=args.temperature, top_k=args.top_k,
                                          top_p=args.top_p, seed=args.seed):
                    if ev["op"] in ("TOKEN", "DONE"):
                        sys.stdout.write(ev["text"])
                        sys.stdout.flush()
                    if ev["op"] == "DONE":
                        print("\n# done: %s, %d tokens" % (DONE_REASONS[ev["reason"]],
                                                           ev["n_tokens"]), file=sys.stderr)
            except ServerError as e:
                print("# error: %s" % e, file=sys.stderr)
            finally:
                signal.signal(signal.SIGINT, signal.default_int_handler)
    except KeyboardInterrupt:
        pass
    finally:
        status = client.shutdown()
    return status or 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 usage="%(prog)s [--infer PATH] [options] -- INFER_ARGS...")
    ap.add_argument("--infer", default="build/infer", help="the infer binary")
    ap.add_argument("--max-tokens", type=int, default=0, help="0: the server's default")
    ap.add_argument("--temperature", type=float, default=None, help="default: the server's")
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    argv = sys.argv[1:] if argv is None else argv
    infer_args = []
    if "--" in argv:
        i = argv.index("--")
        argv, infer_args = argv[:i], argv[i + 1:]
    try:
        return _chat(ap.parse_args(argv), infer_args)
    except (ProtocolError, ServerError, OSError) as e:
        print("infer_client.py: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
