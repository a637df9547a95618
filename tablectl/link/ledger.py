"""The link ledger in PostgreSQL: migrations, and the short transactions that change links.

Every change to a link happens in one transaction that first locks the link's row (in link
id order, so controllers never deadlock), then the tables' cursor rows (in table order). The
rows of a table are applied in seq order, each at most once: a row at or below the table's
`acked_through_seq` was applied already (by this controller or another) and is skipped; the
unique index on (table_ref, seq) makes a second application fail loudly rather than count.
After COMMIT the controller may acknowledge `acked_through_seq` to the table: never before.

psycopg 3 (async): fully typed for mypy --strict, pipelines executemany, and says which
error is which (psycopg.errors): docs/linked-progressives.md, "Why psycopg".
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.resources
import json
import re
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection, AsyncCursor
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import TupleRow

from tablectl.core.effects import JackpotValidated
from tablectl.link.book import (
    EventRow,
    KnownClaim,
    KnownContribution,
    LevelBook,
    LinkBook,
    TableRow,
    Window,
    canonical_json,
    initial_events,
    initialise_level,
    utc_text,
)
from tablectl.link.contract import (
    UNITS_PER_CENT,
    Award,
    ClaimAnswer,
    LevelState,
    LinkClaim,
    LinkContributionReversed,
    LinkDefinition,
    LinkParameters,
    PendingAward,
    split_table,
)

Connection = AsyncConnection[TupleRow]
Cursor = AsyncCursor[TupleRow]
MIGRATIONS_PACKAGE = "tablectl.link.migrations"
_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
EVENT_COLUMNS = (
    "link_id", "version", "kind", "controller", "table_ref", "seq", "level_id", "round_id",
    "seat", "claim_id", "ref_version", "wager_cents", "rate_bp", "contribution_units",
    "display_units", "reserve_units", "overflow_units", "seed_units", "award_cents", "detail",
)  # fmt: skip
# Serialises concurrent `tablectl link migrate` runs (any fixed 64-bit key).
MIGRATE_LOCK_KEY = 0x7461626C_6C696E6B


class LedgerError(Exception):
    """The ledger refuses an operation; the message says why and what to do."""


class LinkInOperation(LedgerError):
    pass


# --- migrations -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def migrations() -> list[Migration]:
    """The versioned SQL files shipped in tablectl/link/migrations/, in order."""
    found = []
    for entry in importlib.resources.files(MIGRATIONS_PACKAGE).iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), entry.name, entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise LedgerError(f"migrations are not numbered 1..N: {[m.name for m in found]}")
    return found


async def migrate(conn: Connection, *, by: str) -> list[str]:
    """Apply the migrations not applied yet, each in a transaction with its record; returns
    the names applied. Idempotent; a changed file that was already applied is an error."""
    applied: list[str] = []
    for migration in migrations():
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK_KEY,))
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS link_schema_version ("
                " version integer PRIMARY KEY, name text NOT NULL, sha256 text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
                " applied_by text NOT NULL)"
            )
            cur = await conn.execute(
                "SELECT name, sha256 FROM link_schema_version WHERE version = %s",
                (migration.version,),
            )
            row = await cur.fetchone()
            if row is not None:
                if row[1] != migration.sha256:
                    raise LedgerError(
                        f"migration {migration.name} differs from the {row[0]} applied to this "
                        "ledger: migrations are never edited once shipped; add a new one"
                    )
                continue
            await conn.execute(migration.sql.encode())  # a script: no parameters
            await conn.execute(
                "INSERT INTO link_schema_version (version, name, sha256, applied_by)"
                " VALUES (%s, %s, %s, %s)",
                (migration.version, migration.name, migration.sha256, by),
            )
            applied.append(migration.name)
    return applied


async def schema_version(conn: Connection) -> int:
    cur = await conn.execute("SELECT to_regclass('link_schema_version') IS NOT NULL")
    row = await cur.fetchone()
    if not row or not row[0]:
        return 0
    cur = await conn.execute("SELECT coalesce(max(version), 0) FROM link_schema_version")
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def check_schema(conn: Connection) -> None:
    have, need = await schema_version(conn), len(migrations())
    if have != need:
        raise LedgerError(
            f"the ledger's schema is at version {have}; this tablectl needs {need}: run "
            "`tablectl link migrate`"
        )


# libpq's TCP settings for a ledger connection, unless the conninfo sets them: a server cut
# off mid-statement (a pulled cable, a partitioned primary) is noticed in seconds, not when
# the kernel gives up (minutes), so the controller goes on to the new primary.
TCP_DEFAULTS = {
    "keepalives": "1",
    "keepalives_idle": "2",
    "keepalives_interval": "1",
    "keepalives_count": "3",
    "tcp_user_timeout": "5000",  # ms: data sent and not acknowledged by the server's TCP
}
# What a server says when a COMMIT's wait for the synchronous standby was cut short: the
# commit is on this server only, and a failover may lose it.
SYNC_WAIT_CANCELLED = "canceling wait for synchronous replication"


async def connect(
    conninfo: str,
    *,
    application_name: str,
    connect_timeout_s: int = 5,
    statement_timeout_ms: int = 10_000,
) -> Connection:
    """A ledger connection: autocommit (transactions are explicit), statements bounded.

    The conninfo may name every node of a replicated cluster with
    `target_session_attrs=read-write`: libpq tries them in turn and keeps the one that
    accepts writes (the primary), so a reconnect after a failover finds the new one.
    """
    given = conninfo_to_dict(conninfo)
    tcp = {k: v for k, v in TCP_DEFAULTS.items() if k not in given}
    conn = await AsyncConnection.connect(
        make_conninfo(conninfo, **tcp),
        autocommit=True,
        connect_timeout=connect_timeout_s,
        application_name=application_name,
    )
    await conn.execute(
        "SELECT set_config('statement_timeout', %s, false), set_config('TimeZone', 'UTC', false)",
        (str(statement_timeout_ms),),
    )
    return conn


Server = tuple[str, str]  # (host, port) as the conninfo names it


def server_of(conn: Connection) -> Server:
    """The server this connection reached, as its conninfo named it."""
    return conn.info.host, str(conn.info.port)


def other_servers_first(conninfo: str, suspect: Server | None) -> str:
    """The conninfo with the suspect server tried last.

    libpq tries a multi-host conninfo's servers in order and keeps the first that accepts
    writes. A primary cut off from its cluster, or one whose Patroni died, may still say it
    accepts writes while no COMMIT of it returns: the controller that lost a write there
    tries the others first, where the new primary is.
    """
    if suspect is None:
        return conninfo
    given = conninfo_to_dict(conninfo)
    hosts = str(given.get("host") or "").split(",")
    if len(hosts) < 2:
        return conninfo
    ports = str(given.get("port") or "").split(",")
    ports = ports * len(hosts) if len(ports) == 1 else ports
    addrs = str(given["hostaddr"]).split(",") if given.get("hostaddr") else [""] * len(hosts)
    servers = list(zip(hosts, ports, addrs, strict=True))
    order = [s for s in servers if (s[0], s[1]) != suspect]
    order += [s for s in servers if (s[0], s[1]) == suspect]
    changed: dict[str, str] = {
        "host": ",".join(s[0] for s in order),
        "port": ",".join(s[1] for s in order),
    }
    if given.get("hostaddr"):
        changed["hostaddr"] = ",".join(s[2] for s in order)
    return make_conninfo(conninfo, **changed)


class OutcomeUnknown(LedgerError):
    """A COMMIT whose outcome the server did not confirm (its wait for the synchronous standby
    was cut short): the rows may be on this server only. Nothing may be acknowledged on its
    word; reconnect and read again what the surviving ledger holds (docs/linked-progressives.md,
    "Failover")."""


class _SyncWaitWatch:
    """Hears the server's warning that a COMMIT stopped waiting for the synchronous standby."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.cancelled = False

    def __call__(self, diagnostic: psycopg.errors.Diagnostic) -> None:
        if SYNC_WAIT_CANCELLED in (diagnostic.message_primary or ""):
            self.cancelled = True

    def __enter__(self) -> _SyncWaitWatch:
        self.conn.add_notice_handler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.remove_notice_handler(self)


@contextlib.asynccontextmanager
async def replicated_transaction(
    conn: Connection, *, require_standby: bool = False, pipeline: bool = False
) -> AsyncIterator[None]:
    """A write transaction whose COMMIT returns only once the synchronous standby has it.

    Where the server has synchronous replication (Patroni's synchronous_mode) a COMMIT
    waits for the standby; a statement timeout or a cancel during that wait makes the server
    return success with a warning, though the rows are on this server only. So the COMMIT
    runs with no statement timeout (the caller's deadline and TCP's bound it), and the
    warning, if it comes, turns the success into OutcomeUnknown.

    With require_standby (a replicated ledger: `database.require_synchronous_standby`), a
    COMMIT that returned on a server no longer asking for a synchronous standby is unknown
    too: that is how a waiting COMMIT returns on an old primary whose settings were reset
    (Patroni coming back on a primary whose Patroni had died, before it demotes it).

    With `pipeline`, the transaction runs in libpq's pipeline mode: BEGIN, every statement
    the body sends before it reads a result, and the COMMIT go to the server together, so a
    transaction costs one round trip per result it waits for, not one per statement (the
    statements, their order and the transaction are the same; on a loaded floor server each
    round trip is a wake-up of two processes).
    """
    with _SyncWaitWatch(conn) as watch:
        async with contextlib.AsyncExitStack() as stack:
            if pipeline:
                await stack.enter_async_context(conn.pipeline())
            async with conn.transaction():
                yield
                await conn.execute("SET LOCAL statement_timeout = 0")
        if watch.cancelled:
            raise OutcomeUnknown(
                "the server committed without its synchronous standby's confirmation"
            )
    if require_standby:
        # Read after the COMMIT: a reload that released it is this session's by now.
        cur = await conn.execute(
            "SELECT current_setting('synchronous_standby_names'),"
            " current_setting('synchronous_commit')"
        )
        names, level = await cur.fetchone() or ("", "")
        if not names or level not in ("on", "remote_apply"):
            raise OutcomeUnknown(
                "the server committed without asking a synchronous standby"
                f" (synchronous_standby_names {names!r}, synchronous_commit {level!r})"
            )


async def confirm_replicated(conn: Connection, *, by: str, require_standby: bool = False) -> None:
    """A COMMIT that waits for the synchronous standby: once it returns, everything this
    server committed before it is on the standby too (WAL is one sequence), so what was read
    on this connection may be acknowledged. On a server that cannot write (a replica, a
    demoted primary) it fails at once (psycopg.errors.ReadOnlySqlTransaction).

    It writes the controller's row in link_controller: PostgreSQL makes a COMMIT that wrote
    nothing wait for no standby (migration 0003)."""
    async with replicated_transaction(conn, require_standby=require_standby, pipeline=True):
        await conn.execute(
            "INSERT INTO link_controller (controller_id, confirmed_at) VALUES (%s, now())"
            " ON CONFLICT (controller_id) DO UPDATE SET confirmed_at = EXCLUDED.confirmed_at",
            (by,),
        )


@contextlib.asynccontextmanager
async def read_snapshot(conn: Connection) -> AsyncIterator[None]:
    """One REPEATABLE READ, READ ONLY transaction: every read inside sees one moment of the
    ledger, however many controllers write meanwhile."""
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield


# --- parameters -------------------------------------------------------------------------------


def parameters_json(definition: LinkDefinition) -> str:
    return canonical_json(definition.model_dump(mode="json"))


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class LinkRow:
    link_id: str
    version: int
    operating: bool
    parameters_version: int
    definition: LinkDefinition
    parameters_sha256: str

    def parameters(self) -> LinkParameters:
        return LinkParameters(
            **self.definition.model_dump(),
            parameters_version=self.parameters_version,
            parameters_sha256=self.parameters_sha256,
        )


_LINK_COLUMNS = "link_id, version, state, parameters_version, parameters, parameters_sha256"


def _link_row(row: Sequence[Any]) -> LinkRow:
    return LinkRow(
        link_id=row[0],
        version=row[1],
        operating=row[2] == "operating",
        parameters_version=row[3],
        definition=LinkDefinition.model_validate_json(row[4]),
        parameters_sha256=row[5],
    )


async def links(conn: Connection, link_ids: Sequence[str] | None = None) -> dict[str, LinkRow]:
    """The ledger's links (those named, or all)."""
    if link_ids is None:
        cur = await conn.execute(f"SELECT {_LINK_COLUMNS} FROM link ORDER BY link_id")  # noqa: S608
    else:
        cur = await conn.execute(
            f"SELECT {_LINK_COLUMNS} FROM link WHERE link_id = ANY(%s) ORDER BY link_id",  # noqa: S608
            (list(link_ids),),
        )
    return {r[0]: _link_row(r) for r in await cur.fetchall()}


async def _locked_links(conn: Connection, link_ids: Iterable[str]) -> dict[str, LinkRow]:
    cur = await conn.execute(
        f"SELECT {_LINK_COLUMNS} FROM link WHERE link_id = ANY(%s)"  # noqa: S608
        " ORDER BY link_id FOR UPDATE",
        (sorted(set(link_ids)),),
    )
    return {r[0]: _link_row(r) for r in await cur.fetchall()}


_LEVEL_COLUMNS = "link_id, level_id, display_units, reserve_units, overflow_units, version"


async def _levels(conn: Connection, found: dict[str, LinkRow]) -> dict[str, dict[str, LevelBook]]:
    cur = await conn.execute(
        f"SELECT {_LEVEL_COLUMNS} FROM link_level"  # noqa: S608
        " WHERE link_id = ANY(%s) ORDER BY link_id, position",
        (sorted(found),),
    )
    return await _level_books(cur, found)


async def _level_books(cur: Cursor, found: dict[str, LinkRow]) -> dict[str, dict[str, LevelBook]]:
    """The level rows a query of _LEVEL_COLUMNS found, of the links in `found`."""
    out: dict[str, dict[str, LevelBook]] = defaultdict(dict)
    for link_id, level_id, display, reserve, overflow, version in await cur.fetchall():
        if link_id not in found:
            continue
        params = found[link_id].definition.level(level_id)
        if params is None:
            raise LedgerError(f"link {link_id}: level {level_id} has no parameters")
        out[link_id][level_id] = LevelBook(params, display, reserve, overflow, version)
    return out


def _book(row: LinkRow, levels: dict[str, LevelBook]) -> LinkBook:
    return LinkBook(
        link_id=row.link_id,
        definition=row.definition,
        operating=row.operating,
        version=row.version,
        parameters_version=row.parameters_version,
        levels=levels,
    )


async def _write(conn: Connection, controller: str, books: Iterable[LinkBook]) -> None:
    """The events, the levels and the link versions the books leave (inside the caller's
    transaction and under its link locks)."""
    books = [b for b in books if b.events]
    events = [e for b in books for e in b.events]
    if not events:
        return
    placeholders = ", ".join(["%s"] * len(EVENT_COLUMNS))
    async with conn.cursor() as cur:
        await cur.executemany(
            f"INSERT INTO link_event ({', '.join(EVENT_COLUMNS)}) VALUES ({placeholders})",  # noqa: S608
            [_event_values(e, controller) for e in events],
        )
        await cur.executemany(
            "UPDATE link_level SET display_units = %s, reserve_units = %s, overflow_units = %s,"
            " version = %s WHERE link_id = %s AND level_id = %s",
            [
                (
                    lv.display_units,
                    lv.reserve_units,
                    lv.overflow_units,
                    lv.changed_at,
                    b.link_id,
                    lv.params.level_id,
                )
                for b in books
                for lv in b.levels.values()
                if lv.changed_at > b.version - len(b.events)
            ],
        )
        await cur.executemany(
            "UPDATE link SET version = %s, state = %s WHERE link_id = %s",
            [(b.version, "operating" if b.operating else "closed", b.link_id) for b in books],
        )


def _event_values(event: EventRow, controller: str) -> tuple[Any, ...]:
    return (
        event.link_id, event.version, event.kind, controller, event.table_ref, event.seq,
        event.level_id, event.round_id, event.seat, event.claim_id, event.ref_version,
        event.wager_cents, event.rate_bp, event.contribution_units, event.display_units,
        event.reserve_units, event.overflow_units, event.seed_units, event.award_cents,
        event.detail,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Applied:
    link_id: str
    outcome: str  # created, changed, unchanged
    parameters_version: int


async def apply_definition(conn: Connection, definition: LinkDefinition, *, by: str) -> Applied:
    """Create a link, or change its parameters while it is closed (NY 5321.18(b)(4))."""
    text = parameters_json(definition)
    async with replicated_transaction(conn):
        found = await _locked_links(conn, [definition.link_id])
        current = found.get(definition.link_id)
        if current is None:
            await conn.execute(
                "INSERT INTO link (link_id, version, state, parameters_version, parameters,"
                " parameters_sha256) VALUES (%s, 0, 'closed', 1, %s, %s)",
                (definition.link_id, text, sha256_text(text)),
            )
            await _claim_tables(conn, definition)
            book = _book(
                LinkRow(definition.link_id, 0, False, 1, definition, sha256_text(text)),
                {lv.level_id: LevelBook(lv, 0) for lv in definition.levels},
            )
            initial_events(book, text)
            await _insert_levels(conn, book, definition)
            await _write(conn, by, [book])
            outcome, version = "created", 1
        elif parameters_json(current.definition) == text:
            outcome, version = "unchanged", current.parameters_version
        else:
            if current.operating:
                raise LinkInOperation(
                    f"link {definition.link_id} is in operation: its parameters cannot change "
                    f"(NY 9 NYCRR 5321.18(b)(4)); close it first: tablectl link close "
                    f"{definition.link_id}"
                )
            _check_change(current.definition, definition)
            levels = (await _levels(conn, found))[definition.link_id]
            book = _book(current, levels)
            version = current.parameters_version + 1
            book.parameters_version = version
            book._next(
                "parameters.changed",
                detail=canonical_json(
                    {"from_version": current.parameters_version, "parameters": json.loads(text)}
                ),
            )
            for lv in definition.levels:
                if lv.level_id in levels:
                    levels[lv.level_id].params = lv
                else:
                    levels[lv.level_id] = LevelBook(lv, 0)
                    initialise_level(book, levels[lv.level_id])
            await _claim_tables(conn, definition)
            await _insert_levels(conn, book, definition)
            await conn.execute(
                "UPDATE link SET parameters_version = %s, parameters = %s, parameters_sha256 = %s"
                " WHERE link_id = %s",
                (version, text, sha256_text(text), definition.link_id),
            )
            await _write(conn, by, [book])
            outcome = "changed"
    return Applied(definition.link_id, outcome, version)


async def _insert_levels(conn: Connection, book: LinkBook, definition: LinkDefinition) -> None:
    """Each level's row (new ones at 0: the book's level.initialized event sets them)."""
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO link_level (link_id, level_id, position, display_units, version)"
            " VALUES (%s, %s, %s, 0, 0) ON CONFLICT (link_id, level_id)"
            " DO UPDATE SET position = EXCLUDED.position",
            [(book.link_id, lv.level_id, i) for i, lv in enumerate(definition.levels)],
        )


def _check_change(old: LinkDefinition, new: LinkDefinition) -> None:
    """What no parameter change may do: lose a level's money, or rewrite where it started."""
    new_levels = {lv.level_id: lv for lv in new.levels}
    for lv in old.levels:
        replacement = new_levels.get(lv.level_id)
        if replacement is None:
            raise LedgerError(
                f"link {old.link_id}: level {lv.level_id} is in the ledger and cannot be removed"
            )
        if replacement.initial_cents != lv.initial_cents:
            raise LedgerError(
                f"link {old.link_id}: level {lv.level_id}'s initial amount is where its meter "
                "started and cannot change (set reset_amount for the next reset)"
            )


async def _claim_tables(conn: Connection, definition: LinkDefinition) -> None:
    """Put the link's tables on it (each table is on one link), and take off the others."""
    cur = await conn.execute(
        "SELECT table_ref, link_id FROM link_table WHERE table_ref = ANY(%s) FOR UPDATE",
        (definition.tables,),
    )
    for table_ref, link_id in await cur.fetchall():
        if link_id is not None and link_id != definition.link_id:
            raise LedgerError(
                f"table {table_ref} is on link {link_id} in the ledger: take it off that link "
                "first (a table's progressive wager is on one link)"
            )
    async with conn.cursor() as c:
        await c.executemany(
            "INSERT INTO link_table (table_ref, link_id) VALUES (%s, %s)"
            " ON CONFLICT (table_ref) DO UPDATE SET link_id = EXCLUDED.link_id",
            [(t, definition.link_id) for t in definition.tables],
        )
    await conn.execute(
        "UPDATE link_table SET link_id = NULL WHERE link_id = %s AND NOT table_ref = ANY(%s)",
        (definition.link_id, definition.tables),
    )


async def set_operating(conn: Connection, link_id: str, operating: bool, *, by: str) -> bool:
    """Open or close a link; False if it already was. Unknown link: LedgerError."""
    async with replicated_transaction(conn):
        found = await _locked_links(conn, [link_id])
        if link_id not in found:
            raise LedgerError(f"no link {link_id} in the ledger: tablectl link apply first")
        row = found[link_id]
        if row.operating == operating:
            return False
        book = _book(row, {})
        book.set_operating(operating, by)
        await _write(conn, by, [book])
    return True


# --- rows from the tables ------------------------------------------------------------------


@dataclass
class BatchResult:
    """What a committed batch leaves: each table's cursor, and what to publish again."""

    cursors: dict[str, int] = field(default_factory=dict)  # table_ref -> acked_through_seq
    gaps: dict[str, int] = field(default_factory=dict)  # table_ref -> the seq it lacks
    links_changed: set[str] = field(default_factory=set)
    moved: set[str] = field(default_factory=set)  # tables whose link changed meanwhile
    answers_changed: dict[str, set[str]] = field(default_factory=dict)  # link -> tables
    # After a hit or a validation, read inside the batch's transaction (so its own replicated
    # COMMIT confirms them): the changed links' states and those tables' claim answers.
    snapshots: list[LinkSnapshot] = field(default_factory=list)
    answers: dict[tuple[str, str], list[ClaimAnswer]] = field(default_factory=dict)
    applied: int = 0  # rows applied (not skipped as already applied)
    events: int = 0


async def table_cursors(conn: Connection) -> dict[str, tuple[str, int]]:
    """Every linked table: (its link, the seq applied through)."""
    cur = await conn.execute(
        "SELECT table_ref, link_id, acked_through_seq FROM link_table WHERE link_id IS NOT NULL"
    )
    return {r[0]: (r[1], r[2]) for r in await cur.fetchall()}


async def apply_rows(
    conn: Connection, rows: Sequence[TableRow], *, by: str, require_standby: bool = False
) -> BatchResult:
    """Apply a batch of table rows in one transaction (each table's rows in seq order), and
    the tables' status changes among them (rows with `online` set: link up/down events).

    The COMMIT is a replicated one (`replicated_transaction`): once this returns, the batch
    is on the synchronous standby too, and its rows may be acknowledged.
    """
    result = BatchResult()
    tables = sorted({r.table_ref for r in rows})
    # In pipeline mode (replicated_transaction): the locks and every read the batch needs go
    # out together, then the writes with the reads after them, then the COMMIT: three round
    # trips for a batch, claims and reversals included.
    async with replicated_transaction(conn, require_standby=require_standby, pipeline=True):
        # Which link each table is on, read first, and the links they are on locked (links
        # before tables: the order every transaction takes, so none deadlock) ...
        cur_link_of = await conn.execute(
            "SELECT table_ref, link_id FROM link_table WHERE table_ref = ANY(%s)", (tables,)
        )
        cur_links = await conn.execute(
            f"SELECT {_LINK_COLUMNS} FROM link WHERE link_id IN ("  # noqa: S608
            " SELECT link_id FROM link_table WHERE table_ref = ANY(%s))"
            " ORDER BY link_id FOR UPDATE",
            (tables,),
        )
        # ... and read again under the tables' own locks: a table taken off its link (under
        # that link's lock, `_claim_tables`) between the two reads has its rows left for the
        # next batch, on the link it is on then, never counted on the one it left.
        cur_tables = await conn.execute(
            "SELECT table_ref, link_id, acked_through_seq, online FROM link_table"
            " WHERE table_ref = ANY(%s) ORDER BY table_ref FOR UPDATE",
            (tables,),
        )
        cur_levels = await conn.execute(
            f"SELECT {_LEVEL_COLUMNS} FROM link_level WHERE link_id IN ("  # noqa: S608
            " SELECT link_id FROM link_table WHERE table_ref = ANY(%s))"
            " ORDER BY link_id, position",
            (tables,),
        )
        cur_clock = await conn.execute("SELECT clock_timestamp()")
        named = await _send_named(conn, rows)
        link_of = {t: lk for t, lk in await cur_link_of.fetchall() if lk is not None}
        found = {r[0]: _link_row(r) for r in await cur_links.fetchall()}
        cursors: dict[str, int] = {}
        online: dict[str, bool | None] = {}
        for table_ref, link_id, seq, was_online in await cur_tables.fetchall():
            if table_ref not in link_of:
                continue  # on no link at the first read: not this batch's (as before)
            if link_id != link_of[table_ref] or link_id not in found:
                result.moved.add(table_ref)
                del link_of[table_ref]
                continue
            cursors[table_ref], online[table_ref] = seq, was_online
        statuses: dict[str, bool] = {}
        levels = await _level_books(cur_levels, found)
        books = {lk: _book(row, levels[lk]) for lk, row in found.items()}
        lock_row = await cur_clock.fetchone()
        lock_time: datetime = lock_row[0] if lock_row else datetime.now(UTC)
        await _read_named(named, books)
        stopped: set[str] = set()
        for row in rows:
            link_id = link_of.get(row.table_ref)
            if link_id is None or link_id not in books:
                continue
            if row.online is not None:
                # A table's retained status (its last-will says offline): link up or down,
                # written only when it differs from what the ledger holds.
                if online[row.table_ref] != row.online:
                    books[link_id].table_status(row.table_ref, row.online)
                    online[row.table_ref] = statuses[row.table_ref] = row.online
                continue
            if row.table_ref in stopped:
                continue
            through = cursors[row.table_ref]
            if row.seq <= through:
                continue  # applied already, by this controller or another
            if row.seq != through + 1:
                result.gaps[row.table_ref] = through + 1
                stopped.add(row.table_ref)
                continue
            books[link_id].apply(row, lock_time)
            cursors[row.table_ref] = row.seq
            result.applied += 1
        await _write(conn, by, books.values())
        moved = [(seq, t) for t, seq in cursors.items()]
        async with conn.cursor() as c:
            await c.executemany(
                "UPDATE link_table SET acked_through_seq = %s"
                " WHERE table_ref = %s AND acked_through_seq < %s",
                [(seq, t, seq) for seq, t in moved],
            )
            if statuses:
                await c.executemany(
                    "UPDATE link_table SET online = %s WHERE table_ref = %s",
                    [(up, t) for t, up in statuses.items()],
                )
        changed = {lk: set(b.awards_changed) for lk, b in books.items() if b.awards_changed}
        # Sent with the writes and the COMMIT (one round trip), read once it returns: they
        # see this transaction's own rows, and its replicated COMMIT confirms them.
        answers = {
            (link_id, ref): await _send_claim_answers(conn, link_id, ref)
            for link_id, refs in sorted(changed.items())
            for ref in sorted(refs)
        }
        sent_snapshots = await _send_snapshots(conn, sorted(changed)) if changed else None
    if sent_snapshots is not None:
        result.snapshots = await _snapshots_of(sent_snapshots)
    for key, cur in answers.items():
        result.answers[key] = await _claim_answers_of(cur)
    result.cursors = cursors
    for link_id, book in books.items():
        if book.events:
            result.links_changed.add(link_id)
            result.events += len(book.events)
        if book.awards_changed:
            result.answers_changed[link_id] = set(book.awards_changed)
    return result


@dataclass
class _Named:
    """The queries for what a batch's claims, validations and reversals name, sent."""

    windows: Cursor | None = None
    claims: Cursor | None = None
    contributions: Cursor | None = None


async def _send_named(conn: Connection, rows: Sequence[TableRow]) -> _Named:
    """For a batch with claims or validations: each level's open window, and the claims
    those rows name (answered before, validated or not); with reversals: the contributions
    they name, and whether each was reversed already (a contribution applied in this batch
    is the book's own to know). Sent after the tables' locks, before any result is read
    (one round trip with them); each keyed by the link the table is on, which those locks
    hold still."""
    sent = _Named()
    claims: list[tuple[str, str]] = []
    reversals: list[tuple[str, int, int, str]] = []
    for row in rows:
        rec = row.record
        if isinstance(rec, LinkClaim):
            claims.append((row.table_ref, rec.claim_id))
        elif isinstance(rec, JackpotValidated):
            claims.append((row.table_ref, rec.hit_id))
        elif isinstance(rec, LinkContributionReversed):
            reversals.append((row.table_ref, rec.round_id, rec.seat, rec.level_id))
    if claims:
        sent.windows = await conn.execute(
            "SELECT DISTINCT ON (link_id, level_id) link_id, level_id, detail FROM link_event"
            " WHERE kind = 'award' AND link_id IN ("
            "  SELECT link_id FROM link_table WHERE table_ref = ANY(%s))"
            " ORDER BY link_id, level_id, version DESC",
            (sorted({t for t, _ in claims}),),
        )
        sent.claims = await conn.execute(
            "SELECT e.link_id, e.table_ref, e.claim_id, e.kind, e.version, EXISTS ("
            "  SELECT 1 FROM link_event v WHERE v.link_id = e.link_id"
            "  AND v.kind = 'award.validated' AND v.ref_version = e.version)"
            " FROM link_event e JOIN link_table t"
            "  ON t.table_ref = e.table_ref AND t.link_id = e.link_id"
            " WHERE e.kind IN ('award', 'claim.refused')"
            " AND (e.table_ref, e.claim_id) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
            ([t for t, _ in claims], [c for _, c in claims]),
        )
    if reversals:
        sent.contributions = await conn.execute(
            "SELECT DISTINCT ON (e.table_ref, e.round_id, e.seat, e.level_id)"
            " e.link_id, e.table_ref, e.round_id, e.seat, e.level_id, e.version,"
            " e.contribution_units, e.display_units, e.reserve_units, e.overflow_units, EXISTS ("
            "  SELECT 1 FROM link_event r WHERE r.link_id = e.link_id"
            "  AND r.kind = 'contribution.reversed' AND r.ref_version = e.version)"
            " FROM link_event e JOIN link_table t"
            "  ON t.table_ref = e.table_ref AND t.link_id = e.link_id"
            " WHERE e.kind = 'contribution'"
            " AND (e.table_ref, e.round_id, e.seat, e.level_id) IN ("
            "  SELECT * FROM unnest(%s::text[], %s::bigint[], %s::integer[], %s::text[]))"
            " ORDER BY e.table_ref, e.round_id, e.seat, e.level_id, e.version DESC",
            tuple(list(column) for column in zip(*reversals, strict=True)),
        )
    return sent


async def _read_named(sent: _Named, books: dict[str, LinkBook]) -> None:
    """What _send_named found, into the books of the links locked (others' rows are left)."""
    if sent.windows is not None:
        for link_id, level_id, detail in await sent.windows.fetchall():
            if link_id not in books:
                continue
            parsed = json.loads(detail)
            award = Award.model_validate(parsed["award"])
            books[link_id].windows[level_id] = Window(
                first_version=award.window_first_version,
                opened_at=datetime.fromisoformat(parsed["window_opened_at"]),
                locked_cents=award.window_locked_cents,
                hits=award.order_in_window,
            )
    if sent.claims is not None:
        for link_id, table_ref, claim_id, kind, version, validated in await sent.claims.fetchall():
            if link_id in books:
                award_version = version if kind == "award" else None
                books[link_id].claims[(table_ref, claim_id)] = KnownClaim(award_version, validated)
    if sent.contributions is not None:
        for (
            link_id,
            table_ref,
            round_id,
            seat,
            level_id,
            version,
            units,
            *pools,
            done,
        ) in await sent.contributions.fetchall():
            if link_id not in books:
                continue
            display, reserve, overflow = pools
            books[link_id].contributions[(table_ref, round_id, seat, level_id)] = KnownContribution(
                version, units, display, reserve, overflow, done
            )


# --- reads -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LinkSnapshot:
    """A link as one consistent read of the ledger sees it."""

    row: LinkRow
    levels: list[LevelState]
    pending: list[PendingAward]


async def snapshots(conn: Connection, link_ids: Sequence[str] | None = None) -> list[LinkSnapshot]:
    """Each link's amounts and pending awards, read in one REPEATABLE READ snapshot (sent in
    pipeline mode: one round trip for the reads and the transaction around them)."""
    async with conn.pipeline(), read_snapshot(conn):
        return await _read_snapshots(conn, link_ids)


async def _read_snapshots(
    conn: Connection, link_ids: Sequence[str] | None = None
) -> list[LinkSnapshot]:
    """The same, inside the caller's transaction."""
    return await _snapshots_of(await _send_snapshots(conn, link_ids))


async def _send_snapshots(
    conn: Connection, link_ids: Sequence[str] | None = None
) -> tuple[Cursor, Cursor, Cursor]:
    """The snapshot's queries, every one sent before any is read (_snapshots_of reads them)."""
    wanted = None if link_ids is None else sorted(link_ids)
    cur_links = await conn.execute(
        f"SELECT {_LINK_COLUMNS} FROM link"  # noqa: S608
        " WHERE %s::text[] IS NULL OR link_id = ANY(%s) ORDER BY link_id",
        (wanted, wanted),
    )
    cur_levels = await conn.execute(
        "SELECT link_id, level_id, display_units FROM link_level"
        " WHERE %s::text[] IS NULL OR link_id = ANY(%s) ORDER BY link_id, position",
        (wanted, wanted),
    )
    cur_pending = await conn.execute(
        "SELECT link_id, version, level_id, table_ref, seat, claim_id, award_cents, at,"
        " detail FROM link_pending_awards WHERE %s::text[] IS NULL OR link_id = ANY(%s)"
        " ORDER BY link_id, version",
        (wanted, wanted),
    )
    return cur_links, cur_levels, cur_pending


async def _snapshots_of(sent: tuple[Cursor, Cursor, Cursor]) -> list[LinkSnapshot]:
    cur_links, cur_levels, cur_pending = sent
    found = {r[0]: _link_row(r) for r in await cur_links.fetchall()}
    levels: dict[str, list[LevelState]] = defaultdict(list)
    for link_id, level_id, units in await cur_levels.fetchall():
        if link_id not in found:
            continue
        params = found[link_id].definition.level(level_id)
        levels[link_id].append(
            LevelState(
                level_id=level_id,
                title=params.title if params else level_id,
                amount_cents=units // UNITS_PER_CENT,
                amount_units=units,
                reset_cents=params.reset_cents if params else 0,
            )
        )
    pending: dict[str, list[PendingAward]] = defaultdict(list)
    for (
        link_id,
        version,
        level_id,
        table_ref,
        seat,
        claim_id,
        cents,
        at,
        detail,
    ) in await cur_pending.fetchall():
        if link_id not in found:
            continue
        site, table = split_table(table_ref)
        order = json.loads(detail)["award"]["order_in_window"]
        pending[link_id].append(
            PendingAward(
                award_version=version,
                level_id=level_id,
                site=site,
                table=table,
                seat=seat,
                claim_id=claim_id,
                amount_cents=cents,
                order_in_window=order,
                at=utc_text(at),
            )
        )
    return [LinkSnapshot(found[k], levels[k], pending[k]) for k in sorted(found)]


async def claim_answers(
    conn: Connection, link_id: str, table_ref: str, limit: int = 25
) -> list[ClaimAnswer]:
    """A table's last claims on a link, newest first, each with its answer."""
    return await _claim_answers_of(await _send_claim_answers(conn, link_id, table_ref, limit))


async def _send_claim_answers(
    conn: Connection, link_id: str, table_ref: str, limit: int = 25
) -> Cursor:
    """claim_answers' query, sent (its result read by _claim_answers_of)."""
    return await conn.execute(
        "SELECT e.kind, e.seq, e.claim_id, e.detail, EXISTS ("
        "  SELECT 1 FROM link_event v WHERE v.link_id = e.link_id"
        "  AND v.kind = 'award.validated' AND v.ref_version = e.version)"
        " FROM link_event e WHERE e.link_id = %s AND e.table_ref = %s"
        " AND e.kind IN ('award', 'claim.refused') ORDER BY e.version DESC LIMIT %s",
        (link_id, table_ref, limit),
    )


async def _claim_answers_of(cur: Cursor) -> list[ClaimAnswer]:
    answers = []
    for kind, seq, claim_id, detail, validated in await cur.fetchall():
        parsed = json.loads(detail)
        if kind == "award":
            answers.append(
                ClaimAnswer(
                    claim_id=claim_id,
                    seq=seq,
                    status="validated" if validated else "awarded",
                    award=Award.model_validate(parsed["award"]),
                )
            )
        else:
            answers.append(
                ClaimAnswer(claim_id=claim_id, seq=seq, status="refused", reason=parsed["reason"])
            )
    return answers


async def stream_events(conn: Connection, link_id: str) -> AsyncIterator[tuple[Any, ...]]:
    """Every event of a link in version order, read with a server-side cursor."""
    columns = ", ".join(("at", "prev_sha256", "sha256", *EVENT_COLUMNS))
    async with conn.transaction(), conn.cursor(name=f"events_{link_id}") as cur:
        await cur.execute(
            f"SELECT {columns} FROM link_event WHERE link_id = %s ORDER BY version",  # noqa: S608
            (link_id,),
        )
        async for row in cur:
            yield row
