"""How much page cache each of the daemon's long-lived SQLite connections may keep.

SQLite's default (`PRAGMA cache_size=-2000`: 2,000 KiB a connection) is a high-water mark
that a connection keeps until it closes: a daemon that runs for months holds each of its
connections' caches at the default once the files outgrow them (issue 29: the writer's filled
in its first few hundred rounds, the shuffle monitor's over the next thousand, +1.3 MB). Each
size below is what that connection's work touches, set once, where it opens:

- the journal's writer appends: each commit touches the right-hand edge of each B-tree
  (journal, its event_id and (type, seq) indexes -- a leaf per row type --, inputs) and the
  kv rows; 512 KiB (128 pages) holds them several times over. The start-up's walk of the
  chains on it reads each page once, which no cache helps.
- a WAL reader (`JournalReader`: the daemon's reader and the relay's) drops its cache at every
  read after a commit anyway; it reads recent rows, a few pages a query.
- the shuffle monitor appends a use and a card order and deletes the oldest order per deal.

Short-lived connections (game pace's snapshot, the CLI's reports) keep the default: theirs
goes when they close. `bench/soak.py` reports SQLite's own heap beside the process's RSS.
"""

from __future__ import annotations

import sqlite3

WRITER_KIB = 512
READER_KIB = 128
SHUFFLE_MONITOR_KIB = 128


def bound_page_cache(db: sqlite3.Connection, kib: int) -> None:
    """At most kib KiB of page cache on this connection (a negative cache_size is KiB)."""
    db.execute(f"PRAGMA cache_size=-{int(kib)}")
