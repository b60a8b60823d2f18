#!/usr/bin/env python3
"""build/infer's interactive REPL in a real terminal: tmux runs it in a detached 200x50 pane,
send-keys types, capture-pane reads the screen. Covers line editing, history (in the session
and from the file across runs), a 20 KB bracketed paste as one turn, a one-line paste typed in
at the cursor, /help, unknown commands, backslash and triple-quote multi-line input, Ctrl-C
(interrupting the model, dropping a line, leaving), Ctrl-D, /quit, the terminal's bracketed
paste mode being off after infer exits (also after SIGTERM at the prompt), an unwritable
history file (one warning line), and /pty refused without --tools.

Usage: repl_tmux_test.py build/infer (meson test sets INFER_SHARED_FIXTURES: the e2b-vocab
fixture, the one with Gemma 4's tokenizer). Fails, never skips, when tmux is missing."""

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TIMEOUT_S = 60


def fail(message):
    print("FAIL: " + message, file=sys.stderr)
    sys.exit(1)


def check(cond, message, screen=None):
    if not cond:
        if screen is not None:
            print("---- screen ----\n" + screen + "\n----------------", file=sys.stderr)
        fail(message)
    print("ok: " + message)


class Pane:
    """One tmux server on a private socket with one 200x50 pane running `command`."""

    def __init__(self, tmp, command, name):
        # A socket of its own: a server just killed may still hold the previous one.
        self.socket = os.path.join(tmp, name + ".sock")
        env = dict(os.environ)
        env.pop("TMUX", None)
        self.env = env
        # The shell keeps the pane after infer exits: it says how infer exited, then cat -v
        # shows whatever the terminal sends next (bracketed paste markers included).
        shell = command + '; echo "[infer exited $?]"; exec cat -v'
        self.tmux("new-session", "-d", "-x", "200", "-y", "50", "-s", "repl", shell)

    def tmux(self, *args, stdin=None):
        r = subprocess.run(["tmux", "-S", self.socket, *args], env=self.env, input=stdin,
                           capture_output=True, text=True, timeout=TIMEOUT_S)
        if r.returncode != 0:
            fail("tmux %s: %s" % (" ".join(args[:2]), r.stderr.strip()))
        return r.stdout

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "repl", *keys)

    def type(self, text):
        self.tmux("send-keys", "-t", "repl", "-l", text)

    def paste(self, path):
        """Pastes the file's bytes; -p: inside ESC[200~ ... ESC[201~ when the app asked."""
        self.tmux("load-buffer", "-b", "p", path)
        self.tmux("paste-buffer", "-p", "-r", "-b", "p", "-t", "repl")

    def screen(self, escapes=False):
        args = ["capture-pane", "-p", "-J", "-S", "-", "-t", "repl"] + (["-e"] if escapes else [])
        # -J joins wrapped lines and keeps trailing spaces: drop those.
        return "\n".join(l.rstrip() for l in self.tmux(*args).split("\n"))

    def wait(self, what, predicate):
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            s = self.screen()
            if predicate(s):
                return s
            time.sleep(0.1)
        check(False, "timed out waiting for " + what, self.screen())

    def wait_count(self, needle, n):
        return self.wait("%d x %r" % (n, needle), lambda s: s.count(needle) >= n)

    def wait_prompt(self, line=""):
        """The last non-empty line is the prompt with `line` on it."""
        def ready(s):
            lines = [l.rstrip() for l in s.split("\n") if l.strip()]
            return bool(lines) and lines[-1] == ("> " + line).rstrip()
        return self.wait("the prompt %r" % ("> " + line), ready)

    def check_paste_mode_off(self, what):
        """After infer exits: tmux pastes plain text into cat -v (no ESC[200~ around it), and the
        terminal echoes it (cooked mode again), so it shows twice."""
        self.tmux("set-buffer", "-b", "q", "PASTE-CHECK")
        self.tmux("paste-buffer", "-p", "-b", "q", "-t", "repl")
        self.keys("Enter")
        s = self.wait("the pasted check text twice", lambda s: s.count("PASTE-CHECK") >= 2)
        check("[200~" not in s.split("[infer exited")[-1],
              "bracketed paste mode is off and the terminal echoes again " + what, s)

    def kill(self):
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], env=self.env,
                       capture_output=True)


def stats(pane):
    """Runs /stats and returns (context tokens, turns)."""
    n = pane.screen().count("context: ")
    pane.type("/stats")
    pane.keys("Enter")
    s = pane.wait_count("context: ", n + 1)
    pane.wait_prompt()
    m = re.findall(r"context: (\d+) tokens.*?, (\d+) turns", s)[-1]
    return int(m[0]), int(m[1])


def unvis(s):
    """libedit's history file encodes entries with strvis: \\ooo octal and \\\\."""
    return re.sub(r"\\([0-7]{3}|\\)", lambda m: "\\" if m[1] == "\\" else chr(int(m[1], 8)), s)


def history_entries(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    check(lines[0] == "_HiStOrY_V2_", "the history file is libedit's format")
    return [unvis(l) for l in lines[1:] if l]


def main():
    if len(sys.argv) != 2:
        fail("usage: repl_tmux_test.py build/infer")
    infer = os.path.abspath(sys.argv[1])
    if shutil.which("tmux") is None:
        fail("tmux is not installed: this test drives the REPL through tmux "
             "(scripts/setup_deps.sh installs it)")
    model = os.path.join(os.environ.get("INFER_SHARED_FIXTURES", ""), "gemma4-text", "e2b-vocab")
    if not os.path.isfile(os.path.join(model, "tokenizer.json")):
        fail("no e2b-vocab fixture at %r (run through meson test)" % model)

    tmp = tempfile.mkdtemp(prefix="infer-repl-tmux-")
    state = os.path.join(tmp, "state")
    history = os.path.join(state, "infer", "history")

    def command(max_tokens, state_home=state):
        return " ".join(shlex.quote(a) for a in [
            "env", "XDG_STATE_HOME=" + state_home, "LANG=C.UTF-8", infer, "--model", model,
            "--threads", "1", "--temperature", "0", "-n", str(max_tokens)])

    panes = []
    try:
        # ---- Run 1: editing, history, commands, multi-line input, the paste, Ctrl-D.
        pane = Pane(tmp, command(4), "run1")
        panes.append(pane)
        pane.wait_prompt()
        replies = 0

        def reply():
            nonlocal replies
            replies += 1
            pane.wait_count("[4 tokens, ", replies)
            return pane.wait_prompt()

        # Line editing: type, move left over "world", insert, Enter.
        pane.type("hello world")
        pane.wait_prompt("hello world")
        pane.keys("Left", "Left", "Left", "Left", "Left")
        pane.type("big ")
        pane.wait_prompt("hello big world")
        pane.keys("Enter")
        s = reply()
        check("> hello big world\n" in s, "the edited line is on the screen", s)
        check(history_entries(history)[-1] == "hello big world",
              "the edited line is what was sent (the history file's last entry)")
        check(os.path.isfile(history), "the history file is under XDG_STATE_HOME/infer")
        check("\x1b[2m[4 tokens, " in pane.screen(escapes=True),
              "the speed line after a reply is dim")
        _, turns = stats(pane)
        check(turns == 1, "one turn so far")

        # History in the session: Up recalls /stats, Up again the line before it.
        pane.keys("Up")
        pane.wait_prompt("/stats")
        pane.keys("Up")
        pane.wait_prompt("hello big world")
        pane.keys("Enter")
        reply()
        _, turns = stats(pane)
        check(turns == 2, "Up Up Enter sent the recalled line as a turn")

        # /help, and an unknown command that reaches nobody.
        pane.type("/help")
        pane.keys("Enter")
        s = pane.wait("the /help text", lambda s: "Commands:" in s)
        pane.wait_prompt()
        for needle in ["/reset", "/stats", "/quit", '"""', "paste", "Ctrl-C"]:
            check(needle in s, "/help mentions " + needle, s)
        pane.type("/foo")
        pane.keys("Enter")
        s = pane.wait("the unknown-command message", lambda s: "unknown command /foo" in s)
        check("infer: unknown command /foo (try /help" in s, "/foo is an unknown command", s)
        pane.wait_prompt()
        _, turns = stats(pane)
        check(turns == 2, "/foo did not reach the model")
        # The PTY commands without --tools: refused, saying what they need.
        check("/pty open CMD" in s and "/ack N" in s, "/help lists the PTY commands", s)
        pane.type("/pty open bash")
        pane.keys("Enter")
        s = pane.wait("the /pty refusal", lambda s: "/pty needs --tools" in s)
        check("infer: /pty needs --tools ROOT" in s, "/pty open without --tools is refused", s)
        pane.wait_prompt()

        # A line ending in \ and a """ block: one turn each.
        pane.type("one \\")
        pane.keys("Enter")
        pane.wait("the continuation prompt", lambda s: s.rstrip().endswith("\n."))
        pane.type("two")
        pane.keys("Enter")
        reply()
        check(history_entries(history)[-1] == "one \ntwo", "the continued lines are one input")
        pane.type('"""')
        pane.keys("Enter")
        for line in ["alpha", "", "beta"]:
            pane.type(line)
            pane.keys("Enter")
        pane.type('"""')
        pane.keys("Enter")
        reply()
        check(history_entries(history)[-1] == "alpha\n\nbeta", 'the """ block is one input')
        context, turns = stats(pane)
        check(turns == 4, "the continuation and the block were one turn each")

        # A 20 KB paste of 342 lines after some typed text: one turn, nothing cut.
        paste_path = os.path.join(tmp, "paste.txt")
        text = "".join("line %03d: the quick brown fox jumps over the lazy dog again\n" % i
                       for i in range(400))
        text = text[:20480 - 1] + "\n"
        with open(paste_path, "w") as f:
            f.write(text)
        check(len(text.encode()) == 20480, "the paste is 20480 bytes")
        ids = subprocess.run([infer, "--model", model, "--tokenize", "--prompt", text],
                             capture_output=True, text=True, timeout=TIMEOUT_S)
        check(ids.returncode == 0, "infer --tokenize counts the paste's tokens")
        paste_tokens = len(ids.stdout.split()) - 1  # without <bos>
        pane.type("Summarize: ")
        pane.wait_prompt("Summarize:")
        # /help's text also says "[pasted N lines, B bytes]": wait for one more than it showed.
        pasted_before = pane.screen().count("[pasted ")
        pane.paste(paste_path)
        s = pane.wait_count("[pasted ", pasted_before + 1)
        # The paste's last newline is dropped: 20479 bytes on the lines before it.
        summary = "[pasted %d lines, %d bytes]" % (text.count("\n"), len(text) - 1)
        check(summary in s, "the paste is summarised as " + summary, s)
        pane.wait("the continuation prompt", lambda s: s.rstrip().endswith("\n."))
        pane.keys("Enter")
        s = reply()
        after, turns = stats(pane)
        check(turns == 5, "the paste went to the model as exactly one turn")
        check(after - context >= paste_tokens,
              "the context grew by at least the paste's %d tokens (grew by %d)" %
              (paste_tokens, after - context))
        lines = text.splitlines()
        check(lines[0] not in s and lines[-1] not in s, "the pasted lines are not echoed", s)

        # A paste without a newline is typed in where the cursor is.
        short_path = os.path.join(tmp, "short.txt")
        with open(short_path, "w") as f:
            f.write("XY\n")
        pane.type("ab")
        pane.keys("Left")
        pane.paste(short_path)
        pane.wait_prompt("aXYb")
        pane.keys("Enter")
        reply()
        check(history_entries(history)[-1] == "aXYb", "a one-line paste went into the line")

        # The last line typed here is what run 2 recalls.
        pane.type("remember me")
        pane.keys("Enter")
        reply()
        pane.keys("C-d")
        s = pane.wait("infer to exit", lambda s: "[infer exited" in s)
        check("[infer exited 0]" in s, "Ctrl-D at an empty prompt leaves with status 0", s)
        pane.kill()

        # ---- Run 2: history from the file, Ctrl-C while generating, on a line, at the prompt.
        pane = Pane(tmp, command(100000), "run2")
        panes.append(pane)
        pane.wait_prompt()
        pane.keys("Up")
        pane.wait_prompt("remember me")
        check(True, "Up recalls a line from the previous run's history file")
        pane.keys("Enter")
        before = pane.screen()
        # The model streams: wait for a screen that changed, then interrupt it.
        pane.wait("tokens to stream", lambda s: len(s) > len(before) + 100)
        pane.keys("C-c")
        s = pane.wait("the interruption", lambda s: "[interrupted]" in s)
        pane.wait_prompt()
        check(True, "Ctrl-C interrupted the generation and the prompt came back")
        pane.type("a draft to drop")
        pane.wait_prompt("a draft to drop")
        pane.keys("C-c")
        pane.wait_prompt()
        _, turns = stats(pane)
        check(turns == 1, "Ctrl-C on a line dropped it: still one turn")
        pane.keys("C-c")
        s = pane.wait("infer to exit", lambda s: "[infer exited" in s)
        check("[infer exited 0]" in s, "Ctrl-C at an empty prompt leaves with status 0", s)
        pane.check_paste_mode_off("after Ctrl-C at the prompt")
        pane.kill()

        # ---- Run 3: a history file that cannot be written is a warning, not a failure.
        not_a_dir = os.path.join(tmp, "not-a-dir")
        with open(not_a_dir, "w") as f:
            f.write("a file where the state folder would be\n")
        pane = Pane(tmp, command(4, not_a_dir), "run3")
        panes.append(pane)
        pane.wait_prompt()
        pane.type("hello")
        pane.keys("Enter")
        pane.wait_count("[4 tokens, ", 1)
        pane.wait_prompt()
        pane.type("again")
        pane.keys("Enter")
        s = pane.wait_count("[4 tokens, ", 2)
        warnings = [l for l in s.split("\n") if "history" in l and l.startswith("infer: ")]
        check(len(warnings) == 1 and "not-a-dir" in warnings[0],
              "an unwritable history file gives one warning line: %r" % warnings, s)
        pane.wait_prompt()
        pane.type("/quit")
        pane.keys("Enter")
        s = pane.wait("infer to exit", lambda s: "[infer exited" in s)
        check("[infer exited 0]" in s, "/quit leaves with status 0 despite the history file", s)
        pane.kill()

        # ---- Run 4: SIGTERM at the prompt still gives the terminal back.
        pane = Pane(tmp, command(4), "run4")
        panes.append(pane)
        pane.wait_prompt()
        pane.type("half-typed")
        pane.wait_prompt("half-typed")
        shell = int(pane.tmux("display-message", "-p", "-t", "repl", "#{pane_pid}").strip())
        with open("/proc/%d/task/%d/children" % (shell, shell)) as f:
            children = [int(p) for p in f.read().split()]
        check(len(children) == 1, "infer is the pane shell's one child")
        os.kill(children[0], signal.SIGTERM)
        s = pane.wait("infer to exit", lambda s: "[infer exited" in s)
        check("[infer exited 143]" in s, "SIGTERM ends infer (128 + 15)", s)
        pane.check_paste_mode_off("after SIGTERM at the prompt")
        print("PASS")
    finally:
        for p in panes:
            p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
