"""The tool frames of `infer --serve` (docs/PROTOCOL.md 4.20-4.29) for the reference client,
standard library only: their layouts (merged into frame_codec.LAYOUTS), the checks of their
values, the names of their enums, and ToolsMixin, the Client's tool methods: declare_tools,
tool_result, tool_watch, pty_open/write/key/resize/close/read, interrupt_action,
raise_interrupt, and the
handling of TOOL_CALL (handlers run on their own threads) and TOOL_EVENT frames."""

import json
import queue
import re
import threading

MAX_DECLARED_TOOLS = 64
MAX_TOOL_NAME_BYTES = 128
MAX_TOOL_DESCRIPTION_BYTES = 4096
MAX_JSON_DEPTH = 64
MAX_TOOL_ERROR_BYTES = 4096
MAX_PTY_ARGS = 256
MAX_PTY_ARG_BYTES = 4096
MAX_PTY_IO_BYTES = 65536
MAX_KEY_NAME_BYTES = 32
MAX_SNOOZE_MS = 86400000

TOOL_STATUS = {0: "ok", 1: "error"}
TOOL_EVENT_KINDS = {1: "tool_ran", 2: "pty_output", 3: "pty_state", 4: "interrupt"}
PTY_WRITE_MODES = {0: "bytes", 1: "key"}
PTY_VIEWS = {0: "raw", 1: "text"}
PTY_STATES = {0: "running", 1: "exited", 2: "signalled", 3: "closed"}
INTERRUPT_ACTIONS = {1: "ack", 2: "snooze", 3: "drop"}
INTERRUPT_STATES = {1: "pending", 2: "acked", 3: "snoozed", 4: "dropped", 5: "injected"}
INTERRUPT_SOURCES = {1: "pty", 2: "subshell", 3: "client"}
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.$-]{1,128}$")

# Tail kinds beyond frame_codec's: "lstr:NAME" (u32 length, then that much UTF-8), "lbytes:NAME"
# (u32 length, then that many bytes), "bytes:NAME" (the rest, raw bytes), "argv:NAME" (the rest,
# UTF-8 arguments separated by NUL bytes) and "event:kind" (TOOL_EVENT: the rest as
# EVENT_LAYOUTS[kind] says).
TOOL_LAYOUTS = {
    # client -> server
    0x0200: ("TOOL_DECLARE", [], ["text:json"]),
    0x0201: ("TOOL_RESULT", [("call_id", "I"), ("status", "I")], ["text:text"]),
    0x0202: ("TOOL_EVENTS", [("mask", "I")], []),
    0x0203: ("PTY_OPEN", [("rows", "H"), ("cols", "H"), ("flags", "I")], ["lstr:cwd", "argv:argv"]),
    0x0204: ("PTY_WRITE", [("pty_id", "I"), ("mode", "I")], ["bytes:data"]),
    0x0205: ("PTY_RESIZE", [("pty_id", "I"), ("rows", "H"), ("cols", "H")], []),
    0x0206: ("PTY_CLOSE", [("pty_id", "I")], []),
    0x0207: ("PTY_READ", [("pty_id", "I"), ("view", "I"), ("from", "Q"), ("max_bytes", "I")], []),
    0x0208: ("INTERRUPT_ACTION", [("interrupt_id", "I"), ("action", "I"), ("snooze_ms", "I")], []),
    0x0209: ("INTERRUPT_RAISE", [("channel", "I")], ["text:text"]),
    # server -> client
    0x8200: ("TOOL_ACK", [], []),
    0x8201: ("TOOL_DECLARED", [("n_tools", "I")], []),
    0x8202: ("TOOL_CALL", [("call_id", "I")], ["lstr:name", "text:arguments"]),
    0x8203: ("PTY_OPENED", [("pty_id", "I"), ("pid", "I")], []),
    0x8204: ("PTY_DATA", [("pty_id", "I"), ("view", "I"), ("from", "Q"), ("next", "Q"),
                          ("end", "Q"), ("skipped", "Q"), ("state", "I"), ("code", "I")],
             ["lbytes:partial_line", "bytes:data"]),
    0x8205: ("TOOL_EVENT", [("kind", "I")], ["event:kind"]),
    0x8206: ("INTERRUPT_RAISED", [("interrupt_id", "I")], []),
}
EVENT_LAYOUTS = {  # TOOL_EVENT kind -> (fixed fields after the kind, tail)
    1: ([("call_id", "I"), ("status", "I"), ("elapsed_ms", "I"), ("pos", "Q"), ("n_tokens", "I"),
         ("client", "I")], ["text:name"]),
    2: ([("pty_id", "I"), ("raw_from", "Q"), ("text_from", "Q")], ["lbytes:raw", "bytes:text"]),
    3: ([("pty_id", "I"), ("state", "I"), ("code", "I")], []),
    4: ([("interrupt_id", "I"), ("state", "I"), ("source", "I"), ("source_id", "I"),
         ("snooze_ms", "I"), ("bytes", "Q"), ("pos", "Q"), ("n_tokens", "I")], []),
}
TOOL_OPCODES = range(0x0200, 0x0300)


def json_depth(text):
    """Bracket nesting outside strings (what MAX_JSON_DEPTH bounds)."""
    depth = deepest = 0
    in_string = escaped = False
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}" and depth:
            depth -= 1
    return deepest


def _no_constant(name):
    raise ValueError("%s is not JSON" % name)


def _json_error(text, want_object=False):
    if json_depth(text) > MAX_JSON_DEPTH:
        return "JSON nested deeper than %d" % MAX_JSON_DEPTH
    try:  # RFC 8259, as the server reads it: no NaN or Infinity
        value = json.loads(text, parse_constant=_no_constant)
    except ValueError as e:
        return "not valid JSON (%s)" % e
    if want_object and not isinstance(value, dict):
        return "not a JSON object"
    return None


def tool_value_error(msg):
    """What is wrong with a decoded tool frame's values (PROTOCOL.md 4.20-4.29), or None."""
    op, get = msg["op"], msg.get
    if op == "TOOL_RESULT":
        if get("status") not in TOOL_STATUS:
            return "status %d" % msg["status"]
        if msg["status"] == 1:
            return "error message over %d bytes" % MAX_TOOL_ERROR_BYTES \
                if len(msg["text"].encode()) > MAX_TOOL_ERROR_BYTES else None
        return _json_error(msg["text"])
    if op == "TOOL_EVENTS" and msg["mask"] & ~0xF:
        return "mask %d" % msg["mask"]
    if op == "PTY_OPEN" and (msg["flags"] or not msg["argv"][0] or not msg["rows"] or
                             not msg["cols"] or len(msg["argv"]) > MAX_PTY_ARGS):
        return "flags, argv[0], rows or cols"
    if op == "PTY_WRITE" and (msg["mode"] not in PTY_WRITE_MODES or
                              len(msg["data"]) > (MAX_PTY_IO_BYTES, MAX_KEY_NAME_BYTES)[msg["mode"]]
                              or (msg["mode"] == 1 and not msg["data"])):
        return "mode %d with %d bytes" % (msg["mode"], len(msg["data"]))
    if op == "PTY_READ" and (msg["view"] not in PTY_VIEWS or
                             not 0 < msg["max_bytes"] <= MAX_PTY_IO_BYTES):
        return "view %d, max_bytes %d" % (msg["view"], msg["max_bytes"])
    if op == "INTERRUPT_ACTION" and (msg["action"] not in INTERRUPT_ACTIONS or
                                     msg["snooze_ms"] > MAX_SNOOZE_MS or
                                     (msg["snooze_ms"] and msg["action"] != 2)):
        return "action %d, snooze_ms %d" % (msg["action"], msg["snooze_ms"])
    if op == "INTERRUPT_RAISE" and not 0 < len(msg["text"].encode()) <= MAX_PTY_IO_BYTES:
        return "a text of %d bytes" % len(msg["text"].encode())
    if op == "TOOL_DECLARED" and msg["n_tools"] > MAX_DECLARED_TOOLS:
        return "%d tools" % msg["n_tools"]
    if op == "TOOL_CALL":
        if not TOOL_NAME.match(msg["name"]):
            return "tool name %r" % msg["name"]
        return _json_error(msg["arguments"], want_object=True)
    if op == "PTY_DATA" and (msg["view"] not in PTY_VIEWS or msg["state"] not in (0, 1, 2) or
                             len(msg["data"]) > MAX_PTY_IO_BYTES):
        return "view %d, state %d" % (msg["view"], msg["state"])
    if op == "TOOL_EVENT":
        kind = msg["kind"]
        if kind == 1 and (msg["status"] not in TOOL_STATUS or msg["client"] > 1 or
                          not TOOL_NAME.match(msg["name"])):
            return "tool_ran: status, client or name"
        if kind == 3 and msg["state"] not in (1, 2, 3):
            return "pty_state: state %d" % msg["state"]
        if kind == 4 and (msg["state"] not in INTERRUPT_STATES or
                          msg["source"] not in INTERRUPT_SOURCES):
            return "interrupt: state %d, source %d" % (msg["state"], msg["source"])
    return None


class ToolsMixin:
    """Client's tool frames. TOOL_CALL frames go to tool_handlers[name](arguments) when there is
    one (run on its own thread; its return value is the result, an exception the error) and to
    self.tool_calls otherwise (answer them with tool_result). TOOL_EVENT frames (after
    tool_watch) go to self.tool_events and to on_tool_event(msg) if given (reader thread)."""

    def _init_tools(self, tool_handlers=None, on_tool_event=None):
        self.tool_handlers = dict(tool_handlers or {})
        self.on_tool_event = on_tool_event
        self.tool_calls = queue.Queue()
        self.tool_events = queue.Queue()

    def _take_tool_frame(self, msg):
        """On the reader thread: True if msg was a TOOL_CALL or TOOL_EVENT (never an answer)."""
        if msg["op"] == "TOOL_EVENT":
            self.tool_events.put(msg)
            if self.on_tool_event is not None:
                self.on_tool_event(msg)
            return True
        if msg["op"] != "TOOL_CALL":
            return False
        handler = self.tool_handlers.get(msg["name"])
        if handler is None:
            self.tool_calls.put(msg)
        else:
            threading.Thread(target=self._run_handler, args=(handler, msg), daemon=True).start()
        return True

    def _run_handler(self, handler, msg):
        try:
            result = handler(json.loads(msg["arguments"]))
        except Exception as e:  # noqa: BLE001 -- the model gets the error, the client goes on
            self.tool_result(msg["call_id"], error="%s: %s" % (type(e).__name__, e))
        else:
            self.tool_result(msg["call_id"], result)

    def declare_tools(self, tools):
        """Replaces the client's tools with `tools` (dicts: name, description, parameters, a
        JSON schema object); [] withdraws them. Returns how many are declared."""
        text = json.dumps(list(tools), ensure_ascii=False, separators=(",", ":"))
        return self._call("TOOL_DECLARE", {"json": text}, want=("TOOL_DECLARED",))["n_tools"]

    def tool_result(self, call_id, result=None, error=None):
        """Answers TOOL_CALL call_id with `result` (any JSON value) or, if error is given, with
        that message. ServerError OUT_OF_ORDER if the call was answered or cancelled."""
        if error is not None:
            fields = {"call_id": call_id, "status": 1,
                      "text": error.encode("utf-8")[:MAX_TOOL_ERROR_BYTES].decode("utf-8", "ignore")}
        else:
            fields = {"call_id": call_id, "status": 0,
                      "text": json.dumps(result, ensure_ascii=False, separators=(",", ":"))}
        self._call("TOOL_RESULT", fields, want=("TOOL_ACK",))

    def tool_watch(self, kinds=tuple(TOOL_EVENT_KINDS.values())):
        """TOOL_EVENT frames of these kinds (names of TOOL_EVENT_KINDS) from now; () stops them."""
        mask = 0
        for k, name in TOOL_EVENT_KINDS.items():
            if name in kinds:
                mask |= 1 << (k - 1)
        self._call("TOOL_EVENTS", {"mask": mask}, want=("TOOL_ACK",))

    def pty_open(self, argv, rows=24, cols=80, cwd=""):
        """Starts argv on a new PTY (cwd relative to the server's --tools ROOT); returns
        (pty_id, pid)."""
        msg = self._call("PTY_OPEN", {"rows": rows, "cols": cols, "flags": 0, "cwd": cwd,
                                      "argv": list(argv)}, want=("PTY_OPENED",))
        return msg["pty_id"], msg["pid"]

    def pty_write(self, pty_id, data):
        """Queues bytes (str is sent as UTF-8) for the PTY's program."""
        data = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        self._call("PTY_WRITE", {"pty_id": pty_id, "mode": 0, "data": data}, want=("TOOL_ACK",))

    def pty_key(self, pty_id, name):
        """Sends a named key: "ctrl-c", "enter", "up", "f5"... (the server's pty_keys)."""
        self._call("PTY_WRITE", {"pty_id": pty_id, "mode": 1, "data": name.encode("ascii")},
                   want=("TOOL_ACK",))

    def pty_resize(self, pty_id, rows, cols):
        self._call("PTY_RESIZE", {"pty_id": pty_id, "rows": rows, "cols": cols},
                   want=("TOOL_ACK",))

    def pty_close(self, pty_id):
        self._call("PTY_CLOSE", {"pty_id": pty_id}, want=("TOOL_ACK",))

    def pty_read(self, pty_id, view="raw", start=0, max_bytes=MAX_PTY_IO_BYTES):
        """Output from offset `start` of the raw or text view: the PTY_DATA dict (data,
        partial_line as bytes; from, next, end, skipped; state, code)."""
        views = {v: k for k, v in PTY_VIEWS.items()}
        return self._call("PTY_READ", {"pty_id": pty_id, "view": views[view], "from": start,
                                       "max_bytes": max_bytes}, want=("PTY_DATA",))

    def raise_interrupt(self, channel, text):
        """A client event on `channel` (any number of the client's choosing): the model hears of
        it as an interrupt (pending until acked, snoozed or dropped). Returns its interrupt id,
        that of the channel's pending one when the text was coalesced into it."""
        return self._call("INTERRUPT_RAISE", {"channel": channel, "text": text},
                          want=("INTERRUPT_RAISED",))["interrupt_id"]

    def interrupt_action(self, interrupt_id, action, snooze_ms=0):
        """action: "ack" (inject at the next token boundary), "snooze" (until the turn ends, or
        snooze_ms), "drop". ServerError OUT_OF_ORDER if the interrupt is done already."""
        codes = {v: k for k, v in INTERRUPT_ACTIONS.items()}
        self._call("INTERRUPT_ACTION", {"interrupt_id": interrupt_id, "action": codes[action],
                                        "snooze_ms": snooze_ms}, want=("TOOL_ACK",))
