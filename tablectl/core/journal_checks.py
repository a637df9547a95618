"""What the journal's own checks tell the core while the table runs. Pure.

Two findings hold the table (docs/design.md, "A journal that proves it is whole"):

- a registered backend acknowledged rows past the journal's end: the database and its mark
  were put back together from an older copy (the mark cannot see that: it was copied with
  it), or the backend's acknowledgement is wrong. The seqs this table would hand out next
  are rows that backend already holds with other content, so nothing more is published and
  no round opens until a technician has looked into it (`tablectl journal recover`);
- a journal too long to walk before the daemon starts is walked in the background: no round
  opens until both chains have passed, and none on a chain found broken.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from tablectl.core.events import AckPastJournal

ROLLBACK_ACTION = (
    "nothing more is published and no round opens: stop the daemon and put back the newest "
    "copy of the database with its mark; if the backend's acknowledgement was wrong and is "
    "withdrawn: tablectl journal recover --by ID --accept acks"
)
BROKEN_ACTION = (
    "no round opens on this journal: tablectl journal verify names where it breaks; put back "
    "the database with its mark from a backup"
)


class RolledBack(BaseModel):
    """A backend's acknowledgement past the journal's end, as the table found it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend_id: str
    acked_through_seq: int
    last_seq: int

    @classmethod
    def of(cls, event: AckPastJournal) -> RolledBack:
        return cls(
            backend_id=event.backend_id,
            acked_through_seq=event.acked_through_seq,
            last_seq=event.last_seq,
        )
