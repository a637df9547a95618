"""When a linked table's progressive is on its link: the rule, on times the shell gives. Pure.

A table is on its link while it has heard a *live* `up` state broadcast (from any controller)
or an ack from the link's controllers within the timeout (docs/linked-progressives.md, Link
up, link down). The retained copy a broker hands a new subscriber may be a dead controller's
last word: it never puts the link up. `closed` is the ledger's word and takes effect at once.
The shell feeds what it hears and the time (milliseconds on its monotonic clock); the watch
says when the core must hear of a change (`LinkLost`, `LinkRestored`), never more often, so
the journal holds one row per change, not one per broadcast.
"""

from __future__ import annotations

from dataclasses import dataclass

from tablectl.core.events import LinkLost, LinkRestored


@dataclass
class LinkWatch:
    timeout_ms: int
    last_heard_ms: int | None = None
    heard: str = "state"  # what was heard last: state, ack
    closed: bool = False
    # What the core was last told; a power-up leaves the core's link silent (down).
    told_up: bool = False

    def heard_state(self, now_ms: int, state: str, *, retained: bool) -> None:
        """A state broadcast: `up`, `down` (one controller cannot read the ledger; others
        may vouch) or `closed`."""
        if state == "closed":
            self.closed = True
        elif state == "up" and not retained:
            self.closed = False
            self.last_heard_ms, self.heard = now_ms, "state"

    def heard_ack(self, now_ms: int) -> None:
        """A controller acknowledged this table's rows (live, not the retained copy): it
        committed them, so it is alive."""
        self.last_heard_ms, self.heard = now_ms, "ack"

    def up(self, now_ms: int) -> bool:
        return (
            not self.closed
            and self.last_heard_ms is not None
            and now_ms - self.last_heard_ms <= self.timeout_ms
        )

    def decide(self, now_ms: int) -> LinkLost | LinkRestored | None:
        """The input the core must hear now, if the link's state changed since it was told."""
        up = self.up(now_ms)
        if up == self.told_up:
            return None
        self.told_up = up
        if up:
            return LinkRestored(heard=self.heard)
        if self.closed:
            return LinkLost(reason="the link is closed", silent_ms=0)
        silent = None if self.last_heard_ms is None else now_ms - self.last_heard_ms
        return LinkLost(
            reason=f"nothing heard from the link controllers for {self.timeout_ms} ms",
            silent_ms=silent if silent is not None else self.timeout_ms,
        )
