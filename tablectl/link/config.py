"""The link controller's config (/etc/tablectl/link.toml): validated, each error naming its field.

A link's parameters are validated with the rule of its game named: Pennsylvania's minimum
rate of progression and initial/reset amounts (649a.12(e)(3) for Three Card Poker,
653a.12(d)(3) for Ultimate Texas Hold 'Em), reusing the table config's own validators. What a
file says is only a proposal: `tablectl link apply` writes it to the ledger, and only while
the link is not in operation (NY 5321.18(b)(4)).
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator

from tablectl.config import FiniteFloat, Host, MqttText, ReadableFile, host_name, load_toml_model
from tablectl.core.games.three_card_poker import TcpProgressiveConfig
from tablectl.core.games.ultimate_texas_holdem import UthProgressiveConfig
from tablectl.link.contract import (
    HitPolicy,
    LevelParameters,
    LinkDefinition,
)
from tablectl.mqtt.contract import ID_PATTERN
from tablectl.util.money import BasisPoints, Cents, Strict

DEFAULT_LINK_CONFIG = Path("/etc/tablectl/link.toml")
_RANGE = re.compile(r"\{([0-9]+)\.\.([0-9]+)\}")
_TABLE_REF = re.compile(r"[a-z0-9][a-z0-9-]{0,62}/[a-z0-9][a-z0-9-]{0,62}")
MAX_TABLES_PER_LINK = 2000


def expand_tables(entries: list[str]) -> list[str]:
    """Table names as written, with `{001..500}` expanded (zero-padded as written)."""
    out: list[str] = []
    for entry in entries:
        match = _RANGE.search(entry)
        if not match:
            out.append(entry)
            continue
        first, last = match[1], match[2]
        if int(last) < int(first) or int(last) - int(first) >= MAX_TABLES_PER_LINK:
            raise ValueError(f"{entry!r}: a range {{FIRST..LAST}} of at most 2000, in order")
        width = len(first) if first.startswith("0") else 0
        for n in range(int(first), int(last) + 1):
            out += expand_tables([entry[: match.start()] + f"{n:0{width}d}" + entry[match.end() :]])
            if len(out) > MAX_TABLES_PER_LINK:  # two ranges in one name multiply: stop early
                raise ValueError(f"more than {MAX_TABLES_PER_LINK} tables: at most that per link")
    return out


class ControllerSection(Strict):
    controller_id: str | None = Field(
        default=None,
        pattern=ID_PATTERN,
        description="names this controller in the ledger and its broadcasts (default host-pid)",
    )
    backend_id: str = Field(
        default="link",
        pattern=ID_PATTERN,
        description="the id linked tables list in mqtt.backends; acks go to ack/{backend_id}",
    )
    # Rows applied in one transaction at most (a batch is whatever is waiting, up to this).
    batch_max_rows: int = Field(default=2000, ge=1, le=100_000)
    # A table's rows held while waiting for a missing one, before asking for a replay.
    max_buffered_rows_per_table: int = Field(default=5000, ge=10, le=1_000_000)

    def resolved_id(self) -> str:
        host = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname())[:40] or "host"
        return self.controller_id or f"{host}-{os.getpid()}"


class DatabaseSection(Strict):
    conninfo: str = Field(
        min_length=1,
        description="a libpq connection string or postgresql:// URL for the ledger",
    )
    connect_timeout_s: int = Field(default=5, ge=1, le=120)
    # A statement that takes longer is cancelled: a wedged lock must not hold a batch forever.
    statement_timeout_ms: int = Field(default=10_000, ge=100, le=600_000)
    # A batch (or the broadcast's probe) not committed and confirmed by the synchronous
    # standby within this is given up: its outcome is unknown, the controller reconnects (to
    # the new primary after a failover) and reads what the ledger holds before any ack.
    commit_timeout_ms: int = Field(default=10_000, ge=500, le=600_000)
    require_synchronous_standby: bool = Field(
        default=False,
        description="a replicated ledger (Patroni's synchronous_mode_strict): a COMMIT counts "
        "only on a server that asks a synchronous standby to confirm it; an old primary "
        "whose settings were reset may return a waiting COMMIT that no standby has",
    )

    @field_validator("conninfo")
    @classmethod
    def _parses(cls, text: str) -> str:
        from psycopg.conninfo import conninfo_to_dict

        if "\0" in text:  # libpq reads a C string: it would silently end there
            raise ValueError("contains a NUL character, which a connection string cannot")
        try:
            given = conninfo_to_dict(text)
        except Exception as exc:  # noqa: BLE001 - psycopg says ProgrammingError; any is bad input
            raise ValueError(f"not a libpq connection string: {exc}") from None
        hosts = str(given.get("host") or given.get("hostaddr") or "").split(",")
        if len(hosts) > 1 and given.get("target_session_attrs") not in ("read-write", "primary"):
            # libpq takes the first host that answers, a replica as readily as the primary.
            raise ValueError(
                f"names {len(hosts)} hosts without target_session_attrs=read-write: libpq "
                "would connect to a replica; add it (docs/linked-progressives.md, High "
                "availability)"
            )
        return text


class LinkMqttSection(Strict):
    host: Host = "127.0.0.1"
    port: int = Field(default=1883, ge=1, le=65535)
    client_id: MqttText | None = Field(default=None, description="default tablectl-link-{id}")
    username: MqttText | None = None
    password: MqttText | None = None
    keepalive_s: int = Field(default=30, ge=5, le=600)
    tls: bool = False
    ca_file: ReadableFile = None
    cert_file: ReadableFile = None
    key_file: ReadableFile = None

    @model_validator(mode="after")
    def _tls_files(self) -> Self:
        named = [n for n in ("ca_file", "cert_file", "key_file") if getattr(self, n) is not None]
        if named and not self.tls:
            raise ValueError(f"{named[0]} is set but tls is false: set tls = true")
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together: set both or neither")
        return self


def _host_port(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or len(port) > 5 or not host:
        raise ValueError(f"{text[:80]!r}: write HOST:PORT, e.g. 127.0.0.1:8088")
    if not 0 <= int(port) < 65536:
        raise ValueError(f"{text[:80]!r}: the port is 0 to 65535")
    host_name(host.removeprefix("[").removesuffix("]"))  # the address the sign binds
    return text


class SignSection(Strict):
    """The web meter sign (one page per link) this controller serves."""

    enabled: bool = True
    listen: Annotated[str, AfterValidator(_host_port)] = "127.0.0.1:8088"

    @property
    def address(self) -> tuple[str, int] | None:
        if not self.enabled:
            return None
        host, _, port = self.listen.rpartition(":")
        return host, int(port)


class LevelSection(Strict):
    level_id: str = Field(default="progressive", pattern=ID_PATTERN)
    title: MqttText = Field(default="Progressive", max_length=40)
    rate_of_progression_percent: BasisPoints
    reserve_rate_percent: BasisPoints = 0
    initial_amount: Cents
    reset_amount: Cents
    limit_amount: Cents | None = None

    @model_validator(mode="after")
    def _coherent(self) -> Self:
        if self.rate_of_progression_percent + self.reserve_rate_percent > 10_000:
            raise ValueError("rate_of_progression_percent + reserve_rate_percent exceed 100%")
        if self.limit_amount is not None:
            for name in ("initial_amount", "reset_amount"):
                if getattr(self, name) > self.limit_amount:
                    raise ValueError(f"{name} is above limit_amount: the meter could not show it")
        return self


def _game_rules(game: str, paytable: str | None, wager: int, level: LevelSection) -> None:
    """The game's own progressive rules, as the table config states them (one place)."""
    dumped = level.model_dump()
    values = {
        "wager": f"{wager // 100}.{wager % 100:02d}",
        "rate_of_progression_percent": dumped["rate_of_progression_percent"],
        "initial_amount": dumped["initial_amount"],
        "reset_amount": dumped["reset_amount"],
    }
    try:
        if game == "three-card-poker":
            if paytable is None:
                raise ValueError('paytable: Three Card Poker names it ("A" or "B", 649a.12(e))')
            TcpProgressiveConfig.model_validate({**values, "paytable": paytable})
        else:
            UthProgressiveConfig.model_validate(values)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = ".".join(str(p) for p in error["loc"]) or "rate_of_progression_percent"
            where = "wager" if field == "wager" else f"level {level.level_id}: {field}"
            problems.append(f"{where}: {str(error['msg']).removeprefix('Value error, ')}")
        raise ValueError("; ".join(problems)) from None


class LinkSection(Strict):
    link_id: str = Field(pattern=ID_PATTERN)
    title: MqttText = Field(default="Progressive", max_length=60)
    game: Literal["three-card-poker", "ultimate-texas-holdem"]
    paytable: Literal["A", "B"] | None = None
    wager: Cents
    hit_policy: HitPolicy = Field(
        description="ordered (NY 5321.18(b)(3)(iii): record the order; each is paid from the "
        "meter the one before left) or full-amount-each (NM 15.1.24.19(A))"
    )
    simultaneous_window_ms: int = Field(default=1000, ge=0, le=60_000)
    link_timeout_s: FiniteFloat = Field(default=5, ge=1, le=60)
    broadcast_interval_ms: int = Field(default=500, ge=50, le=1000)
    tables: list[str] = Field(min_length=1, max_length=MAX_TABLES_PER_LINK)
    level: list[LevelSection] = Field(min_length=1)

    @field_validator("tables")
    @classmethod
    def _expand(cls, entries: list[str]) -> list[str]:
        tables = expand_tables(entries)
        bad = [
            t
            for t in tables
            if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}/[a-z0-9][a-z0-9-]{0,62}", t)
        ]
        if bad:
            raise ValueError(f"{bad[0]!r}: write site/table, as the table's config names them")
        dupes = sorted({t for t in tables if tables.count(t) > 1})
        if dupes:
            raise ValueError(f"a table is listed twice: {dupes[0]}")
        if len(tables) > MAX_TABLES_PER_LINK:
            raise ValueError(f"{len(tables)} tables: at most {MAX_TABLES_PER_LINK} per link")
        return tables

    @model_validator(mode="after")
    def _rules(self) -> Self:
        ids = [lv.level_id for lv in self.level]
        if len(set(ids)) != len(ids):
            raise ValueError(f"level ids must differ: {ids}")
        if self.game == "ultimate-texas-holdem" and self.paytable is not None:
            raise ValueError("paytable: Ultimate Texas Hold 'Em's progressive has one (653a.12(d))")
        for level in self.level:
            _game_rules(self.game, self.paytable, self.wager, level)
        return self

    def definition(self, backend_id: str) -> LinkDefinition:
        return LinkDefinition(
            link_id=self.link_id,
            title=self.title,
            game=self.game,
            paytable=self.paytable,
            wager_cents=self.wager,
            hit_policy=self.hit_policy,
            simultaneous_window_ms=self.simultaneous_window_ms,
            link_timeout_ms=round(self.link_timeout_s * 1000),
            broadcast_interval_ms=self.broadcast_interval_ms,
            backend_id=backend_id,
            tables=self.tables,
            levels=[
                LevelParameters(
                    level_id=lv.level_id,
                    title=lv.title,
                    rate_bp=lv.rate_of_progression_percent,
                    reserve_rate_bp=lv.reserve_rate_percent,
                    initial_cents=lv.initial_amount,
                    reset_cents=lv.reset_amount,
                    limit_cents=lv.limit_amount,
                )
                for lv in self.level
            ],
        )


class LinkConfig(Strict):
    controller: ControllerSection = ControllerSection()
    database: DatabaseSection
    mqtt: LinkMqttSection = LinkMqttSection()
    sign: SignSection = SignSection()
    link: list[LinkSection] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_link_per_table(self) -> Self:
        ids = [lk.link_id for lk in self.link]
        if len(set(ids)) != len(ids):
            raise ValueError(f"link ids must differ: {ids}")
        seen: dict[str, str] = {}
        for lk in self.link:
            for table in lk.tables:
                if table in seen:
                    raise ValueError(
                        f"table {table} is on links {seen[table]} and {lk.link_id}: a table's "
                        "progressive wager is on one link"
                    )
                seen[table] = lk.link_id
        return self

    def definitions(self) -> list[LinkDefinition]:
        return [lk.definition(self.controller.backend_id) for lk in self.link]


def load_link_config(path: Path) -> LinkConfig:
    """Read and validate a link controller config; raises ConfigError naming each field."""
    return load_toml_model(path, LinkConfig)
