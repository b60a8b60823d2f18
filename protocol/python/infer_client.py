#!/usr/bin/env python3
"""Reference client for `infer --serve` (docs/PROTOCOL.md), standard library only.

Three layers, usable on their own:
  * the codec (frame_codec.py, re-exported here, so `infer_client.encode_frame` etc. work):
    encode_frame()/decode_payload() and FrameDecoder, table-driven from LAYOUTS;
  * Client: spawns `infer --serve ...` (or wraps given pipes), does the handshake, and runs a
    reader thread so that input, interrupts and control frames can be sent while tokens stream;
    with `--memory`, memory_recall/store/forget/query/list/watch and memory_events
    (memory_frames.py); with `--tools ROOT`, declare_tools, tool_result and tool handlers,
    tool_watch and tool_events, pty_open/write/key/resize/close/read, interrupt_action and
    raise_interrupt (tool_frames.py);
  * a line-based CLI: each line appended as raw text and answered, or with --chat wrapped in
    Gemma 4 turns (the server tokenizes markers such as <|turn> in APPEND_TEXT as control tokens):
      python3 protocol/python/infer_client.py --chat --infer build/infer -- --model DIR
"""

import argparse
import collections
import itertools
import os
import queue
import signal
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frame_codec import *  # noqa: E402,F401,F403  (the codec is part of this module's API)
from memory_frames import MemoryMixin  # noqa: E402
from tool_frames import *  # noqa: E402,F401,F403  (names of the tool frames' enums, ToolsMixin)

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


class Client(MemoryMixin, ToolsMixin):
    """One session with `infer --serve`. Thread-safe senders; a reader thread routes each server
    frame to the queue of the request id it answers (unsolicited frames go to self.events).
    Frames that answer nothing go apart, whatever their request id: MEMORY_EVENT (MemoryMixin),
    TOOL_CALL and TOOL_EVENT (ToolsMixin: tool_handlers, self.tool_calls, self.tool_events)."""

    def __init__(self, argv=None, stdin=None, stdout=None, client_name="infer_client.py",
                 on_memory_event=None, tool_handlers=None, on_tool_event=None):
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
        self._init_memory(on_memory_event)
        self._init_tools(tool_handlers, on_tool_event)
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
                    if self._take_memory_event(msg) or self._take_tool_frame(msg):
                        continue  # never an answer: the caller's own queues
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

class ChatTurns:
    """Gemma 4 chat turns (GEMMA4_CHAT.md) around each line: <bos> when the context is empty
    (a server started with --system has already opened it with its system turn), the model's
    open turn closed by <turn|> (the server stops before the end id, so it is not in the
    context), then the user turn and the opening of the model's."""

    def __init__(self, client):
        self.client = client
        self.model_turn_open = False

    def reset(self):
        self.model_turn_open = False

    def text(self, line):
        if self.client.stats()["pos"] == 0:
            head = "<bos>"
        else:
            head = "<turn|>\n" if self.model_turn_open else ""
        self.model_turn_open = True
        return head + "<|turn>user\n" + line + "<turn|>\n<|turn>model\n"


def _memory_command(client, line):
    """/memory, /remember, /forget N, /recall TEXT (a server started with --memory); True if
    the line was one of them."""
    word, _, rest = line.partition(" ")
    if word not in ("/memory", "/remember", "/forget", "/recall"):
        return False
    try:
        if word == "/memory":
            for e in client.memory_list():
                print("# #%d pos %d, %d tokens, strength %.2f: %s"
                      % (e["episode_id"], e["pos0"], e["n_tokens"], e["strength"], e["preview"]),
                      file=sys.stderr)
        elif word == "/remember":
            print("# stored %s" % [e["episode_id"] for e in client.memory_store()], file=sys.stderr)
        elif word == "/forget":
            print("# forgot #%d" % client.memory_forget(int(rest)), file=sys.stderr)
        else:
            for e in client.memory_recall(rest):
                print("# recalled #%d: score %.3f, association %.3f"
                      % (e["episode_id"], e["score"], e["association"]), file=sys.stderr)
    except (ServerError, ValueError) as e:
        print("# error: %s" % e, file=sys.stderr)
    return True


def _chat(args, infer_args):
    client = Client([args.infer, "--serve"] + infer_args)
    h = client.hello
    turns = ChatTurns(client) if args.chat else None
    print("# %s, vocab %d, context %d tokens; each line is %s and answered; Ctrl-C "
          "interrupts; /stats /reset /quit, and with --memory /memory /remember /forget N "
          "/recall TEXT" % (h["model_name"], h["vocab_size"], h["context_tokens"],
                                               "a user turn" if turns else "appended as raw text"),
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
                if turns:
                    turns.reset()
                continue
            if _memory_command(client, line):
                continue
            client.append_text(turns.text(line) if turns else line + "\n")
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
    ap.add_argument("--chat", action="store_true",
                    help="wrap each line in Gemma 4 turns (default: append it as raw text)")
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
