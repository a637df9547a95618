"""Soak: does a table daemon's memory stay flat over months of play? (issue 29, P4)

One table daemon, in this process as `tablectl run` would be, on simulated devices (the
shuffler on a pseudo-terminal, the shoe on the virtual USB bus through pyusb, the mock GPIO),
a private Mosquitto and a backend that acknowledges in a process of its own, plays --rounds
rounds in compressed time: each round is a minute on the journal's clock (the daemon's
`journal_clock`), and game pace is computed every --pace-every rounds, as the daemon does
each minute, so its windows hold hours of play as they would. Every round has two wagers;
hits (stacked hands the floor validates and documents), dealer voids, shoe jams, shuffler
jams and miscounts come at fixed intervals, for each of the three games.

Every --every rounds it prints the process's RSS (and its file-backed part: the libraries,
the WAL's -shm), malloc's bytes in use and held from the system, SQLite's own heap
(sqlite3_memory_used: the connections' page caches, bounded by store/page_cache.py), the
Python heap (the blocks allocated, the arenas its allocator holds, and, with tracing,
tracemalloc's bytes), the journal's size
per round over the last stretch, and the time pace took (median and max of its computations
in the stretch, and the rows each read); after the run, the growth from the end of the
--warmup rounds, and tracemalloc's top growth by line (tracing starts after the warm-up and
slows the daemon: --frames 0 measures without it, --frames 8 shows each growth's callers).
Goals: RSS growth <= 2 MB over 20,000 rounds after a 1,000-round warm-up; pace's time
constant as the journal grows.

Run: .venv/bin/python bench/soak.py [--game G] [--rounds N] [--quick]
Without --game each game runs in a process of its own, one after the other. --quick: 2,500
rounds, a 500-round warm-up, every 500.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.dealer import Wanted, by_shoe, stacked_deal
from tablectl.simulators.demo import SCRIPTS, SHOE_PORT, DemoTable, simulated_config
from tablectl.simulators.shoe import ShoeSimulator, VirtualUsbBackend
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.config import DeckSection, load_config
from tablectl.core.table import Phase, TableState
from tablectl.service.daemon import Daemon, freeze_start_up
from tablectl.service.dispatcher import GIL_SWITCH_S
from tablectl.store import page_cache
from tablectl.util import logs

REPO = Path(__file__).resolve().parents[1]
GAMES = ("three-card-poker", "ultimate-texas-holdem", "let-it-ride")
DEALER, FLOOR = "dealer-0117", "floor-0042"
# Every so many rounds: a hit (two stacked hands of the demo's script), a dealer's void, a
# shoe jam mid-deal, a shuffler jam, a card lost before a shuffle (a miscount).
HIT_EVERY, VOID_EVERY, SHOE_JAM_EVERY, SHUFFLER_JAM_EVERY, MISCOUNT_EVERY = 40, 37, 53, 83, 89
VOID_REASONS = ("dealer-card-exposed", "community-card-exposed")
ROUND_MINUTES = 1.0  # a round's length on the journal's clock


def rss_kb(field: str = "VmRSS") -> int:
    """/proc/self/status's field in KiB: VmRSS, or its parts RssAnon, RssFile, RssShmem."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def pymalloc_arenas_mb() -> float:
    """CPython's own allocator (objects up to 512 bytes): the arenas it holds from the system,
    in MB (1 MiB each; an arena goes back only once every object in it is freed). Read from
    sys._debugmallocstats, which writes to the C stderr."""
    with tempfile.TemporaryFile() as out:
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        for line in out.read().decode().splitlines():
            if line.startswith("# arenas allocated current"):
                return int(line.split("=")[1]) * ARENA_BYTES / 2**20
    return 0.0


ARENA_BYTES = 1 << 20  # CPython 3.10 on, 64-bit


def _sqlite_library() -> ctypes.CDLL | None:
    """The libsqlite3 this process's sqlite3 module loaded (its soname from our own maps)."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split()[-1]
        if "/libsqlite3" in path:
            try:
                lib = ctypes.CDLL(path)  # already loaded: the same library, not a second copy
                lib.sqlite3_memory_used.restype = ctypes.c_int64
                return lib
            except (OSError, AttributeError):
                return None
    return None  # the module statically linked: SQLite's memory is not reported


_SQLITE = _sqlite_library()


def sqlite_memory_kb() -> int | None:
    """SQLite's own heap (sqlite3_memory_used: every connection's page cache, schema and
    statements), or None where it cannot be read."""
    return None if _SQLITE is None else int(_SQLITE.sqlite3_memory_used()) // 1024


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def malloc_kb() -> tuple[int, int] | None:
    """glibc's bytes in use (mallinfo2: uordblks + hblkhd) and held from the system (arena +
    hblkhd: in use, or free and kept for reuse), or None off glibc. What is held and not in
    use is fragmentation, resident where it was touched."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
    except (OSError, AttributeError):
        return None
    info = libc.mallinfo2()
    return int(info.uordblks + info.hblkhd) // 1024, int(info.arena + info.hblkhd) // 1024


class RoundClock:
    """The journal's clock: ROUND_MINUTES a round, and within a round the time it took,
    sped up (never past the next round's start): monotonic, hours of play in minutes."""

    def __init__(self, start: datetime) -> None:
        self._start = start
        self._round = 0
        self._round_began = time.monotonic()

    def next_round(self) -> None:
        self._round += 1
        self._round_began = time.monotonic()

    def __call__(self) -> datetime:
        within = min((time.monotonic() - self._round_began) * 60, ROUND_MINUTES * 60 - 1)
        return self._start + timedelta(minutes=self._round * ROUND_MINUTES, seconds=within)


@dataclass
class Stretch:
    """Figures since the last report (reset at each: the bench keeps nothing per round)."""

    pace_ms: list[float] = field(default_factory=list)
    rounds: int = 0
    hits: int = 0
    voids: int = 0
    faults: int = 0
    unwagered: int = 0  # chips that did not become wagers (should stay 0)


def journal_bytes(database: Path) -> int:
    return sum(p.stat().st_size for p in (database, Path(f"{database}-wal")) if p.exists())


async def until(table: DemoTable, n: int, predicate: Callable[[TableState], bool]) -> None:
    try:
        await table.until(predicate, timeout_s=20)
    except TimeoutError:
        s = table.state
        raise SystemExit(
            f"round {n}: stuck in {s.phase}, blocked {s.blocked}, occupied {s.occupied}, "
            f"deal {s.deal}, counted {s.counted}"
        ) from None


async def play_round(
    n: int,
    table: DemoTable,
    sim: ShufflerSimulator,
    shoe: ShoeSimulator,
    rng: random.Random,
    stretch: Stretch,
) -> None:
    daemon = table.daemon
    game = daemon.game
    seats_total = table.config.table.seats
    while True:  # a fault the last round left is mended first, as a dealer would
        await until(
            table,
            n,
            lambda s: (
                (s.phase is Phase.BETTING and not s.occupied)
                or s.blocked is not None
                or s.shuffler_fault is not None
            ),
        )
        if table.state.shuffler_fault is not None:
            await table.command({"cmd": "reshuffle", "by": DEALER})
        elif table.state.blocked is not None:
            sim.load_full_deck()
            await table.replace_deck()
        else:
            break
        stretch.faults += 1
    script = SCRIPTS[game.name]
    wanted: Wanted = script[2 if n % (2 * HIT_EVERY) == 0 else 4] if n % HIT_EVERY == 0 else {}
    seats = set(rng.sample(range(1, seats_total + 1), 2)) | {
        w for w in wanted if isinstance(w, int)
    }
    for seat in sorted(seats):
        table.players.place_chip(seat)
    await asyncio.sleep(table.rest_s)
    table.players.press_lockout()
    await until(table, n, lambda s: s.phase is Phase.LOCKED and s.counted)
    for seat in sorted(seats):
        table.players.remove_chip(seat)
    if n % MISCOUNT_EVERY == 0:
        sim.remove_card()  # the next count is 51 (649a.5(b))
    if n % VOID_EVERY == 0:
        # A card exposed: the dealer's (TCP, UTH) or a community card (Let It Ride has no
        # dealer's hand).
        exposed = next(r for r in VOID_REASONS if r in game.void_reasons())
        await table.command({"cmd": "void", "reason": exposed, "by": DEALER})
        stretch.voids += 1
    else:
        if n % SHOE_JAM_EVERY == 0:
            shoe.knobs.jam_at = 2  # 649a.13(f): the round is void
        plan = game.deal_plan(sorted(seats))
        shoe_cards, by_hand = by_shoe(plan, stacked_deal(plan, wanted, rng))
        shoe.load(shoe_cards)
        extra = [seat for seat in sorted(seats) if seat not in table.state.wagers]
        stretch.unwagered += len(extra)
        await table.command({"cmd": "deal", "seats": extra, "by": DEALER})
        await until(
            table,
            n,
            lambda s: s.phase is not Phase.LOCKED or (s.deal is not None and s.deal.complete),
        )
        if table.state.phase is Phase.LOCKED:
            community = "".join(map(str, by_hand.community))
            await table.command({"cmd": "settle", "community": community, "by": DEALER})
            hits = len(table.state.hits_pending)
            for hit in table.state.hits_pending:
                await table.command({"cmd": "validate", "hit_id": hit.hit_id, "by": FLOOR})
                if not hit.paid_from_table_inventory:
                    await table.command({"cmd": "document", "hit_id": hit.hit_id, "by": FLOOR})
            stretch.hits += hits
        else:
            shoe.clear()
            await table.clear_shoe()
            stretch.faults += 1
    if n % SHUFFLER_JAM_EVERY == 0:
        sim.knobs.jam_next_shuffle = True  # 649a.13(e): a reshuffle is asked for
    stretch.rounds += 1


def _top_growth(base: tracemalloc.Snapshot, frames: int, limit: int = 8) -> list[str]:
    now = tracemalloc.take_snapshot().filter_traces(
        (tracemalloc.Filter(False, tracemalloc.__file__),)
    )
    stats = now.compare_to(base, "lineno" if frames == 1 else "traceback")
    stats.sort(key=lambda s: s.size_diff, reverse=True)
    out = []
    for s in stats[:limit]:
        if s.size_diff > 0:
            out.append(
                f"    {s.size_diff / 1024:+9.1f} KiB {s.count_diff:+7d} blocks  {s.traceback[0]}"
            )
            out += [f"{'':30}{frame}" for frame in list(s.traceback)[1:]]
    return out


async def soak(
    game: str, rounds: int, warmup: int, every: int, pace_every: int, frames: int
) -> None:
    trace = frames > 0
    rng = random.Random(29)
    clock = RoundClock(datetime.now(UTC).replace(microsecond=0))
    with (
        PrivateBroker() as broker,
        tempfile.TemporaryDirectory(prefix="tablectl-soak-") as tmp,
    ):
        data_dir = Path(tmp)
        sim = ShufflerSimulator(shuffle_ms=1, rng=random.Random(1))
        shoe = ShoeSimulator(card_ms=0, rng=random.Random(2))
        usb_bus = VirtualUsbBackend()
        usb_bus.plug(shoe, asyncio.get_running_loop())
        cfg = simulated_config(
            load_config(REPO / "config" / f"{game}.toml"),
            port=sim.open_pty(),
            broker=broker,
            data_dir=data_dir / "table",
            shoe_port=f"{SHOE_PORT}:{shoe.identity.serial_number}",
        )
        cfg = cfg.model_copy(
            update={
                "gpio": cfg.gpio.model_copy(
                    update={"chip_present_ms": 10, "chip_bounce_ms": 5, "lockout_debounce_ms": 0}
                ),
                "deck": cfg.deck or DeckSection(),
            }
        )
        (data_dir / "table").mkdir()
        players = SimulatedTableInputs(cfg.table.seats)
        daemon = Daemon(
            cfg, gpio_backend=players.backend(), usb_backend=usb_bus, journal_clock=clock
        )
        # The backend acknowledges from a process of its own (what it keeps is not ours).
        backend_out = data_dir / "backend.out"
        with backend_out.open("w") as out:
            backend = await asyncio.create_subprocess_exec(
                sys.executable,
                str(REPO / "bench" / "mqtt_subscriber.py"),
                "--host",
                broker.host,
                "--port",
                str(broker.port),
                "--ack",
                cfg.mqtt.backends[0],
                "--topic",
                "tablectl/v1/+/+/evt",
                stdout=out,
            )
        table = DemoTable(daemon, players, rng, sim)
        task = asyncio.create_task(daemon.run())
        try:
            await daemon.ready.wait()
            freeze_start_up()  # as `tablectl run` does before READY
            sys.setswitchinterval(GIL_SWITCH_S)  # as `tablectl run` does (serve())
            assert daemon.pace is not None and daemon.store is not None
            pace = daemon.pace
            stretch = Stretch()
            compute = pace.compute

            def timed() -> Any:
                t0 = time.perf_counter()
                try:
                    return compute()
                finally:
                    stretch.pace_ms.append((time.perf_counter() - t0) * 1000)

            pace.compute = timed  # type: ignore[method-assign]
            await table.introduce_decks()
            print(
                f"soak: {game}, {rounds} rounds (warm-up {warmup}), pace every {pace_every} "
                f"rounds, tracemalloc {'on' if trace else 'off'}; load {_load()}",
                flush=True,
            )
            print(
                f"SQLite's page caches are bounded (store/page_cache.py): the writer "
                f"{page_cache.WRITER_KIB} KiB, each reader {page_cache.READER_KIB} KiB (the "
                f"daemon keeps two), the shuffle monitor {page_cache.SHUFFLE_MONITOR_KIB} KiB; "
                f"pace's snapshot keeps SQLite's default (2,000 KiB) only while it reads",
                flush=True,
            )
            print(
                f"{'rounds':>7} {'RSS MB':>8} {'file MB':>7} {'malloc MB':>9} {'held MB':>7} "
                f"{'sqlite MB':>9} "
                f"{'py blocks':>10} {'arenas MB':>9} "
                f"{'traced MB':>9} {'B/round':>8} {'rows':>8} {'pace ms med':>11} "
                f"{'max':>6} {'rows/pace':>9} {'s/round':>8}",
                flush=True,
            )
            base: dict[str, float] = {}
            snapshot: tracemalloc.Snapshot | None = None
            last_bytes, last_rows_read, last_t = journal_bytes(cfg.storage.database), 0, 0.0
            last_t = time.monotonic()
            for n in range(1, rounds + 1):
                await play_round(n, table, sim, shoe, rng, stretch)
                for device in (sim, shoe):  # the simulators' own record, not the daemon's
                    device.history.clear()
                clock.next_round()
                if n % pace_every == 0:
                    pace.refresh()
                if n % every and n != warmup:
                    continue
                await asyncio.sleep(0.05)  # the pace asked for, the backend's acks
                gc.collect()
                size = journal_bytes(cfg.storage.database)
                malloc = malloc_kb() or (0, 0)
                pace_runs = max(1, len(stretch.pace_ms))
                figures = {
                    "rss": rss_kb() / 1024,
                    "file": (rss_kb("RssFile") + rss_kb("RssShmem")) / 1024,
                    "malloc": malloc[0] / 1024,
                    "held": malloc[1] / 1024,
                    "sqlite": (sqlite_memory_kb() or 0) / 1024,
                    "blocks": float(sys.getallocatedblocks()),
                    "arenas": pymalloc_arenas_mb(),
                    "traced": tracemalloc.get_traced_memory()[0] / 2**20 if trace else 0.0,
                }
                now = time.monotonic()
                print(
                    f"{n:>7} {figures['rss']:>8.1f} {figures['file']:>7.1f} "
                    f"{figures['malloc']:>9.1f} {figures['held']:>7.1f} {figures['sqlite']:>9.2f} "
                    f"{int(figures['blocks']):>10} {figures['arenas']:>9.0f} "
                    f"{figures['traced']:>9.2f} "
                    f"{(size - last_bytes) / max(1, stretch.rounds):>8.0f} "
                    f"{daemon.store.last_seq:>8} "
                    f"{statistics.median(stretch.pace_ms or [0]):>11.2f} "
                    f"{max(stretch.pace_ms or [0]):>6.1f} "
                    f"{(pace.rows_read - last_rows_read) / pace_runs:>9.0f} "
                    f"{(now - last_t) / max(1, stretch.rounds):>8.3f}",
                    flush=True,
                )
                last_bytes, last_rows_read, last_t = size, pace.rows_read, now
                stretch = Stretch()
                if n == warmup:
                    base = figures
                    if trace:
                        tracemalloc.start(frames)
                        snapshot = tracemalloc.take_snapshot()
                        base["traced"] = 0.0
            if base:
                growth = {k: figures[k] - base[k] for k in figures}
                print(
                    f"growth after the warm-up ({rounds - warmup} rounds): RSS "
                    f"{growth['rss']:+.2f} MB (file-backed {growth['file']:+.2f} MB), malloc "
                    f"{growth['malloc']:+.2f} MB (SQLite {growth['sqlite']:+.2f} MB; held "
                    f"{growth['held']:+.2f} MB), Python "
                    f"blocks {int(growth['blocks']):+d} (its arenas {growth['arenas']:+.0f} MB); "
                    f"goal RSS <= +2 MB over 20,000; "
                    f"load {_load()}",
                    flush=True,
                )
            if snapshot is not None:
                print("tracemalloc, top growth since the warm-up:")
                print("\n".join(_top_growth(snapshot, frames)) or "    (none)", flush=True)
                tracemalloc.stop()
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            backend.terminate()
            await backend.wait()
            sim.close()
            shoe.close()


def _load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--game", choices=GAMES)
    parser.add_argument("--rounds", type=int, default=21_000)
    parser.add_argument("--warmup", type=int, default=1_000)
    parser.add_argument("--every", type=int, default=1_000)
    parser.add_argument("--pace-every", type=int, default=5, help="rounds (minutes)")
    parser.add_argument(
        "--frames", type=int, default=1, help="tracemalloc's frames a trace (0: no tracing)"
    )
    parser.add_argument("--quick", action="store_true", help="2,500 rounds, every 500")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.warmup, args.every = 2_500, 500, 500
    if args.game is None:
        for game in GAMES:  # each in its own process: its RSS is its own
            subprocess.run([sys.executable, __file__, "--game", game, *sys.argv[1:]], check=True)
        return
    logs.configure("ERROR")
    asyncio.run(soak(args.game, args.rounds, args.warmup, args.every, args.pace_every, args.frames))


if __name__ == "__main__":
    main()
