"""The episodic memory frames of `infer --serve` (docs/PROTOCOL.md 4.14-4.19) for the reference
client, standard library only: MemoryMixin, the Client's memory methods. A server without
--memory answers each of them with ERROR NOT_AVAILABLE, raised as ServerError."""

import queue

from frame_codec import MAX_LIST_EPISODES


class MemoryMixin:
    """MEMORY_EVENT frames (after memory_watch(True)) go to self.memory_events whatever their
    request id (the frame that caused them, 0 for background work), and to on_memory_event(msg)
    if given (called on the reader thread)."""

    def _init_memory(self, on_memory_event=None):
        self.memory_events = queue.Queue()
        self.on_memory_event = on_memory_event

    def _take_memory_event(self, msg):
        """On the reader thread: True if msg was a MEMORY_EVENT (never an answer)."""
        if msg["op"] != "MEMORY_EVENT":
            return False
        self.memory_events.put(msg)
        if self.on_memory_event is not None:
            self.on_memory_event(msg)
        return True

    def memory_recall(self, text, timeout=60):
        """The text joins the conversation and is recalled from now; returns the episodes placed
        in the recall tier, best first: dicts episode_id, n_tokens, score, association,
        strength, age_s."""
        return self._call("MEMORY_RECALL", {"text": text}, want=("MEMORY_RECALLED",),
                          timeout=timeout)["episodes"]

    def memory_store(self, timeout=60):
        """Episodes now of the window's tokens not yet stored; returns them (episode_id, pos0,
        n_tokens)."""
        return self._call("MEMORY_STORE", want=("MEMORY_STORED",), timeout=timeout)["episodes"]

    def memory_forget(self, episode_id):
        """Removes an episode; ServerError BAD_VALUE if there is none with that id."""
        return self._call("MEMORY_FORGET", {"episode_id": episode_id},
                          want=("MEMORY_FORGOTTEN",))["episode_id"]

    def memory_query(self, first=0, max_count=MAX_LIST_EPISODES):
        """One page of the store by id: {"total": N, "episodes": [dicts episode_id, pos0,
        n_tokens, strength, written_ms, recalled_ms, preview]}."""
        msg = self._call("MEMORY_QUERY", {"first": first, "max_count": max_count},
                         want=("MEMORY_LIST",))
        return {"total": msg["total"], "episodes": msg["episodes"]}

    def memory_list(self):
        """Every episode of the store, page by page."""
        out, first = [], 0
        while True:
            page = self.memory_query(first)
            out += page["episodes"]
            first += len(page["episodes"])
            if not page["episodes"] or first >= page["total"]:
                return out

    def memory_watch(self, on=True):
        """Turns MEMORY_EVENT frames on or off (they arrive in self.memory_events)."""
        self._call("MEMORY_WATCH", {"on": 1 if on else 0}, want=("MEMORY_WATCH_ACK",))
