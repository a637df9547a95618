"""`tablectl run` imports what the daemon uses, not what only other verbs do (issue 29, item 2).

The daemon is started as systemd starts it (tests/daemons.py), under `python -X importtime`,
which writes a line to stderr for every module the process imports, as it imports it. Read
after READY and the stop: what start-up, the table's play until then and the shutdown
imported. The time itself is bench/startup.py's to measure, not a test's.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tablectl.simulators.broker import PrivateBroker

from .daemons import daemon_process
from .test_service import TABLECTL

IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \| +(\S+)$", re.MULTILINE)

# What other verbs load, each on demand: the records (their PDF, export and signing key), the
# link controller (PostgreSQL, its ledger and web sign), and the CLI's other verbs.
NOT_FOR_THE_DAEMON = (
    "reportlab",
    "cryptography",
    "psycopg",
    "asyncpg",
    "aiohttp",
    "tablectl.records.pdf",
    "tablectl.records.export",
    "tablectl.records.signing",
    "tablectl.records.build",
    "tablectl.records.sheets",
    "tablectl.link.controller",
    "tablectl.link.ledger",
    "tablectl.link.sign",
    "tablectl.link.broadcast",
    *(
        f"tablectl.cli.{verb}"
        for verb in (
            "control",
            "demo",
            "devices",
            "journal",
            "link",
            "mqtt",
            "paytable",
            "records",
            "reference",
            "shuffle",
            "simulate",
            "test",
            "watch",
        )
    ),
)


def _loaded(name: str, modules: set[str]) -> bool:
    return name in modules or any(m.startswith(name + ".") for m in modules)


async def test_the_daemon_imports_none_of_what_only_other_verbs_use(
    tmp_path: Path, broker: PrivateBroker
) -> None:
    argv = (sys.executable, "-X", "importtime", str(TABLECTL), "run", "--config", "CONFIG")
    async with daemon_process(tmp_path, broker, *argv) as daemon:
        code, stderr = await daemon.stop()
    assert code == 0, stderr[-3000:]
    modules = set(IMPORTED.findall(stderr))
    # What it does need was seen: the listing is read right.
    for needed in ("tablectl.service.daemon", "tablectl.cli.run", "tablectl.store.journal"):
        assert needed in modules
    assert [name for name in NOT_FOR_THE_DAEMON if _loaded(name, modules)] == []
