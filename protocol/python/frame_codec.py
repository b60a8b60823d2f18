"""The frame codec of the `infer --serve` protocol (docs/PROTOCOL.md), standard library only:
encode_frame()/decode_payload() and FrameDecoder, table-driven from LAYOUTS, which mirrors
PROTOCOL.md section 4 field by field (test_codec.py checks it against the C++ codec).
The tool frames' layouts and checks live in tool_frames.py and are merged in here.
infer_client.py re-exports all of it."""

import struct

from tool_frames import EVENT_LAYOUTS, TOOL_LAYOUTS, tool_value_error

PROTOCOL_VERSION = 1
HEADER = struct.Struct("<IHHI")  # payload_bytes, opcode, flags, request_id
HEADER_BYTES = HEADER.size  # 12
MAX_PAYLOAD_BYTES = 1 << 20
MAX_STOP_IDS = 64
MAX_LABEL_BYTES = 1024
MAX_LIST_EPISODES = 4096  # MEMORY_QUERY max_count
MAX_PREVIEW_BYTES = 96    # MEMORY_LIST previews

# GENERATE flags
GEN_DEFAULT_SAMPLING = 1 << 0
GEN_STOP_AT_EOT = 1 << 1
GEN_GATED = 1 << 2
GEN_GATE_EVENTS = 1 << 3
GEN_KNOWN_FLAGS = 0xF

ERRORS = {1: "MALFORMED", 2: "UNKNOWN_OPCODE", 3: "FRAME_TOO_LARGE", 4: "OUT_OF_ORDER",
          5: "VERSION_MISMATCH", 6: "ID_OUT_OF_RANGE", 7: "BAD_VALUE", 8: "NOT_AVAILABLE",
          9: "ENGINE", 10: "TRUNCATED", 11: "CONTEXT_FULL"}
DONE_REASONS = {1: "eos", 2: "stop_id", 3: "limit", 4: "interrupted", 5: "gate", 6: "error"}
GATE_DECISIONS = {0: "speak", 1: "stop_and_listen", 2: "act"}
MEMORY_EVENT_KINDS = {1: "stored", 2: "recalled", 3: "forgotten", 4: "replaced"}

# Record layouts of the memory answers (PROTOCOL.md 4.15-4.17): a u32 count, then the records;
# a "preview" field is a u32 length and that many bytes of UTF-8 (at most MAX_PREVIEW_BYTES).
RECORDS = {
    "recalled": [("episode_id", "Q"), ("n_tokens", "I"), ("score", "f"), ("association", "f"),
                 ("strength", "f"), ("age_s", "I")],
    "stored": [("episode_id", "Q"), ("pos0", "Q"), ("n_tokens", "I")],
    "listed": [("episode_id", "Q"), ("pos0", "Q"), ("n_tokens", "I"), ("strength", "f"),
               ("written_ms", "Q"), ("recalled_ms", "Q"), ("preview", "preview")],
}
_RECORD_FIXED = {k: struct.Struct("<" + "".join(c for _, c in v if c != "preview"))
                 for k, v in RECORDS.items()}

# opcode -> (name, fixed fields [(name, struct code)], tail)
# tail: None (payload ends after the fixed fields), "text:NAME" (rest is UTF-8),
# "ids:NAME" (rest is u32 ids), "n_ids:NAME" (u32 count then ids; may be followed by text), or
# "records:NAME:KIND" (u32 count then records of RECORDS[KIND], a list of dicts).
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
    0x0100: ("MEMORY_RECALL", [], ["text:text"]),
    0x0101: ("MEMORY_STORE", [], []),
    0x0102: ("MEMORY_FORGET", [("episode_id", "Q")], []),
    0x0103: ("MEMORY_QUERY", [("first", "I"), ("max_count", "I")], []),
    0x0104: ("MEMORY_WATCH", [("on", "I")], []),
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
    0x8100: ("MEMORY_RECALLED", [], ["records:episodes:recalled"]),
    0x8101: ("MEMORY_STORED", [], ["records:episodes:stored"]),
    0x8102: ("MEMORY_FORGOTTEN", [("episode_id", "Q")], []),
    0x8103: ("MEMORY_LIST", [("total", "I")], ["records:episodes:listed"]),
    0x8104: ("MEMORY_EVENT", [("kind", "I"), ("episode_id", "Q"), ("pos0", "Q"), ("n_tokens", "I"),
                              ("score", "f"), ("association", "f"), ("strength", "f")], []),
    0x8105: ("MEMORY_WATCH_ACK", [], []),
}
LAYOUTS.update(TOOL_LAYOUTS)
OPCODES = {name: op for op, (name, _, _) in LAYOUTS.items()}
MEMORY_OPCODES = range(0x0100, 0x0200)  # the memory range, with and without the 0x8000 bit
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
    _, fixed, tail = LAYOUTS[op]
    return _encode_fields(fixed, tail, fields)


def _utf8(value):
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def _encode_fields(fixed, tail, fields):
    out = bytearray(struct.pack("<" + "".join(code for _, code in fixed),
                                *[fields[n] for n, _ in fixed]))
    for item in tail:
        kind, field = item.split(":")[:2]
        value = fields.get(field, [] if kind in ("ids", "n_ids", "records", "argv") else b"")
        if kind == "records":
            out += _encode_records(item.split(":")[2], value)
        elif kind in ("text", "bytes"):
            out += _utf8(value)
        elif kind in ("lstr", "lbytes"):
            out += struct.pack("<I", len(_utf8(value))) + _utf8(value)
        elif kind == "argv":
            out += b"\0".join(_utf8(a) for a in value)
        elif kind == "event":
            sub_fixed, sub_tail = EVENT_LAYOUTS[fields[field]]
            out += _encode_fields(sub_fixed, sub_tail, fields)
        else:
            if kind == "n_ids":
                out += struct.pack("<I", len(value))
            out += struct.pack("<%dI" % len(value), *value)
    return bytes(out)


def _encode_records(kind, records):
    out = bytearray(struct.pack("<I", len(records)))
    layout = RECORDS[kind]
    fixed = _RECORD_FIXED[kind]
    for r in records:
        out += fixed.pack(*[r[n] for n, c in layout if c != "preview"])
        for n, c in layout:
            if c == "preview":
                text = r.get(n, "")
                data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
                out += struct.pack("<I", len(data)) + data
    return bytes(out)


def _decode_records(name, kind, payload, at):
    """The records at payload[at:]: (list of dicts, offset after them)."""
    if len(payload) < at + 4:
        raise ProtocolError("%s: no record count" % name)
    (n,) = struct.unpack_from("<I", payload, at)
    at += 4
    layout = RECORDS[kind]
    fixed = _RECORD_FIXED[kind]
    if n > MAX_LIST_EPISODES and kind == "listed" or (len(payload) - at) // fixed.size < n:
        raise ProtocolError("%s: %d records do not fit the payload" % (name, n))
    names = [f for f, c in layout if c != "preview"]
    records = []
    for _ in range(n):
        if len(payload) < at + fixed.size:
            raise ProtocolError("%s: a record is cut short" % name)
        r = dict(zip(names, fixed.unpack_from(payload, at)))
        at += fixed.size
        for f, c in layout:
            if c != "preview":
                continue
            if len(payload) < at + 4:
                raise ProtocolError("%s: a preview length is cut short" % name)
            (k,) = struct.unpack_from("<I", payload, at)
            if k > MAX_PREVIEW_BYTES or len(payload) < at + 4 + k:
                raise ProtocolError("%s: a preview of %d bytes" % (name, k))
            try:
                r[f] = bytes(payload[at + 4:at + 4 + k]).decode("utf-8", errors="strict")
            except UnicodeDecodeError as e:
                raise ProtocolError("%s: %s is not valid UTF-8 (%s)" % (name, f, e))
            at += 4 + k
        records.append(r)
    return records, at


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
# A record tail's kind is its third part: ("records", NAME, KIND).


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
    at = _decode_tail(name, tail, payload, n_fixed, msg)
    if at != len(payload):
        raise ProtocolError("%s: %d bytes after the last field" % (name, len(payload) - at))
    if name in ("DONE", "GATE", "MEMORY_EVENT", "MEMORY_QUERY", "MEMORY_WATCH"):
        _check_values(msg)
    if op & 0x7FFF in TOOLS_OPCODES:
        error = tool_value_error(msg)
        if error:
            raise ProtocolError("%s: %s" % (name, error))
    return msg


def _text(name, field, data):
    try:
        return bytes(data).decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise ProtocolError("%s: %s is not valid UTF-8 (%s)" % (name, field, e))


def _decode_tail(name, tail, payload, at, msg):
    """Decodes the tail fields from payload[at:] into msg; returns the offset after them."""
    for kind, field, *rest in tail:
        if kind == "records":
            msg[field], at = _decode_records(name, rest[0], payload, at)
        elif kind in ("text", "argv"):
            msg[field] = _text(name, field, payload[at:])
            if kind == "argv":
                msg[field] = msg[field].split("\0")
            at = len(payload)
        elif kind == "bytes":
            msg[field] = bytes(payload[at:])
            at = len(payload)
        elif kind in ("lstr", "lbytes"):
            if len(payload) < at + 4:
                raise ProtocolError("%s: no length for %s" % (name, field))
            (n,) = struct.unpack_from("<I", payload, at)
            if len(payload) < at + 4 + n:
                raise ProtocolError("%s: %s of %d bytes does not fit" % (name, field, n))
            data = bytes(payload[at + 4:at + 4 + n])
            msg[field] = _text(name, field, data) if kind == "lstr" else data
            at += 4 + n
        elif kind == "event":
            layout = EVENT_LAYOUTS.get(msg[field])
            if layout is None:
                raise ProtocolError("%s: %s %d" % (name, field, msg[field]))
            sub = struct.Struct("<" + "".join(c for _, c in layout[0]))
            if len(payload) < at + sub.size or (not layout[1] and len(payload) != at + sub.size):
                raise ProtocolError("%s: payload is %d bytes for %s %d"
                                    % (name, len(payload), field, msg[field]))
            msg.update(zip((n for n, _ in layout[0]), sub.unpack_from(payload, at)))
            at = _decode_tail(name, [tuple(t.split(":")) for t in layout[1]], payload,
                              at + sub.size, msg)
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
    return at


def _check_values(msg):
    if msg["op"] == "DONE" and msg["reason"] not in DONE_REASONS:
        raise ProtocolError("DONE: reason %d" % msg["reason"])
    if msg["op"] == "GATE" and msg["decision"] not in GATE_DECISIONS:
        raise ProtocolError("GATE: decision %d" % msg["decision"])
    if msg["op"] == "MEMORY_EVENT" and msg["kind"] not in MEMORY_EVENT_KINDS:
        raise ProtocolError("MEMORY_EVENT: kind %d" % msg["kind"])
    if msg["op"] == "MEMORY_QUERY" and msg["max_count"] > MAX_LIST_EPISODES:
        raise ProtocolError("MEMORY_QUERY: max_count %d" % msg["max_count"])
    if msg["op"] == "MEMORY_WATCH" and msg["on"] not in (0, 1):
        raise ProtocolError("MEMORY_WATCH: on %d" % msg["on"])


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
