"""The ACME line shuffler, simulated: it speaks the real protocol (protocol.py) on a TCP port,
with knobs to misbehave (a count of 51 or 53, a jam by event or shown only in its status, an
event id reused with another report, a reboot that keeps or changes its boot counter, silence,
garbage lines, a connection closed under a command, another serial number).

    python -m tablectl_asciishuffler.simulator --port 7001
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random

from tablectl_asciishuffler import protocol as p

LISTED = 8  # events a status lists at most


class AsciiShufflerSimulator:
    def __init__(
        self,
        *,
        serial: str = "ACME-0001",
        shuffle_ms: int = 30,
        boot: int = 1,
        rng: random.Random | None = None,
    ) -> None:
        self.model, self.serial, self.firmware = "ACME-LS2", serial, "2.4.1"
        self.shuffle_ms = shuffle_ms
        self.rng = rng or random.Random(0)
        self.boot = boot
        self.state = "idle"
        self.fault = "-"
        self.count = 52
        self.events: list[p.Event] = []  # held until acknowledged
        self.history: list[tuple[int, p.Event]] = []  # every event it ever listed
        self.shuffles = 0
        self._next_id = 1
        self._cache: tuple[int, bytes] | None = None  # (seq, the reply to it)
        self._restate: p.Event | None = None  # an event id reported again, saying otherwise
        # knobs
        self.counts: list[int] = []  # the next shuffles' counts (else 52)
        self.jam_next = False  # the next shuffle jams, with a FLT event
        self.jam_status_only = False  # ... jams with no event: only its status says so
        self.silent = False  # answers nothing
        self.garbage = False  # a garbage line before each answer
        self.close_on: str | None = None  # closes the connection when asked this verb
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    # --- knobs ---------------------------------------------------------------------------

    def reboot(self, *, keep_boot: bool = False) -> None:
        """A power cycle: its unacknowledged events are lost, ids start at 1 again. A faulty
        unit keeps its boot counter (keep_boot), as if it had not rebooted."""
        if not keep_boot:
            self.boot += 1
        self.state, self.fault, self.events, self._next_id, self._cache = "idle", "-", [], 1, None
        for writer in list(self._writers):
            with contextlib.suppress(OSError):
                writer.write(p.encode(0, "RB", self.boot))

    def conflict(self) -> None:
        """List the last event taken again, under its id, saying something else."""
        _, last = next((h for h in reversed(self.history) if h[0] == self.boot), (0, None))
        if last is None:
            return
        other = "51" if last.arg != "51" else "52"
        self._restate = p.Event(last.event_id, "END", other)  # listed once, acknowledged or not

    def clear_fault(self) -> None:
        self.state, self.fault = "idle", "-"

    def add_event(self, kind: str, arg: str = "") -> p.Event:
        event = p.Event(self._next_id, kind, arg)
        self._next_id += 1
        self.events.append(event)
        self.history.append((self.boot, event))
        return event

    # --- the server ----------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen; the address a table's config gives as its port."""
        self._server = await asyncio.start_server(self._client, host, port)
        bound = self._server.sockets[0].getsockname()
        return f"socket://{bound[0]}:{bound[1]}"

    def close(self) -> None:
        for writer in list(self._writers):
            writer.close()
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()

    def drop_connections(self) -> None:
        for writer in list(self._writers):
            writer.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        lines = p.LineReader()
        try:
            while data := await reader.read(4096):
                for line in lines.feed(data):
                    if self.close_on == line.verb:
                        self.close_on = None
                        if line.verb == "SH":
                            self._shuffle()  # it took the command, then the cable went
                        writer.close()
                        return
                    reply = self._answer(line)
                    if reply is None or self.silent:
                        continue
                    if self.garbage:
                        writer.write(
                            b"\x00\xff garbage *ZZ\r\n"
                            + bytes(self.rng.randrange(256) for _ in range(7))
                            + b"\n"
                        )
                    writer.write(reply)
                await writer.drain()
        except (OSError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    def _answer(self, line: p.Line) -> bytes | None:
        if self._cache is not None and self._cache[0] == line.seq:
            return self._cache[1]  # asked again: the same answer, not done twice
        reply = self._do(line)
        self._cache = (line.seq, reply)
        return reply

    def _do(self, line: p.Line) -> bytes:
        seq = line.seq
        match line.verb:
            case "HI":
                return p.encode(seq, "ID", self.model, self.serial, self.firmware)
            case "ST":
                if len(line.args) == 2 and all(a.isdigit() for a in line.args):
                    boot, ack = map(int, line.args)
                    if boot == self.boot:
                        self.events = [e for e in self.events if e.event_id > ack]
                listed = self.events[:LISTED]
                if self._restate is not None:
                    listed, self._restate = [self._restate, *listed], None
                status = p.Status(self.boot, self.state, self.fault, self.count, tuple(listed))
                return p.encode_status(seq, status)
            case "SH":
                if self.state == "busy":
                    return p.encode(seq, "NO", "busy")
                if self.state == "fault":
                    return p.encode(seq, "NO", "fault")
                self._shuffle()
                return p.encode(seq, "OK")
            case "CT":
                if self.state == "busy":
                    return p.encode(seq, "NO", "busy")
                return p.encode(seq, "CT", self.count, 52)
            case "TS":
                return p.encode(seq, "TS", "PASS", "all", "motors", "ok")
        return p.encode(seq, "NO", "unknown")

    def _shuffle(self) -> None:
        self.state = "busy"
        self.shuffles += 1
        self.add_event("STA")
        task = asyncio.get_running_loop().create_task(self._finish())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(self) -> None:
        await asyncio.sleep(self.shuffle_ms / 1000)
        if self.state != "busy":
            return  # rebooted meanwhile
        if self.jam_next or self.jam_status_only:
            self.state, self.fault = "fault", "JAM"
            if self.jam_next:
                self.add_event("FLT", "JAM")
            self.jam_next = self.jam_status_only = False
            return
        self.count = self.counts.pop(0) if self.counts else 52
        self.state = "ready"
        self.add_event("END", str(self.count))


async def _main(port: int) -> None:
    sim = AsciiShufflerSimulator(rng=random.Random())
    print(await sim.start(port=port), flush=True)
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="the ACME line shuffler, simulated")
    parser.add_argument("--port", type=int, default=7001)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args.port))


if __name__ == "__main__":
    main()
