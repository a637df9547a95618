"""The one reconnect component, on virtual time: when each attempt happens, what is logged."""

from __future__ import annotations

import asyncio
import contextlib
import random

from structlog.testing import capture_logs

from tablectl.util.backoff import Backoff
from tablectl.util.clock import run_virtual
from tablectl.util.reconnect import Permanent, Reconnector, ReconnectState


class Device:
    """Refuses the first `refusals` connects; each connection lasts `lasts_s`."""

    def __init__(self, refusals: int, lasts_s: float = 1.0, error: Exception | None = None):
        self.refusals = refusals
        self.lasts_s = lasts_s
        self.error = error or ConnectionRefusedError("no such device")
        self.attempts: list[float] = []
        self.closed = 0

    async def connect(self) -> str:
        self.attempts.append(asyncio.get_running_loop().time())
        if self.refusals > 0:
            self.refusals -= 1
            raise self.error
        return "conn"

    async def serve(self, conn: str) -> None:
        await asyncio.sleep(self.lasts_s)
        raise ConnectionResetError("unplugged")

    async def close(self, conn: str) -> None:
        self.closed += 1


def _reconnector(device: Device) -> Reconnector[str]:
    return Reconnector(
        name="shoe",
        connect=device.connect,
        serve=device.serve,
        close=device.close,
        backoff=Backoff(initial_s=0.1, max_s=1.0, jitter=0, _rng=random.Random(1)),
        retry_on=(OSError, Permanent),
    )


def _run(device: Device, seconds: float) -> Reconnector[str]:
    async def main() -> Reconnector[str]:
        r = _reconnector(device)
        task = asyncio.create_task(r.run())
        await asyncio.sleep(seconds)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return r

    return run_virtual(main())


def test_attempts_back_off_exponentially_to_the_ceiling() -> None:
    device = Device(refusals=6, lasts_s=100)
    r = _run(device, 5)
    gaps = [round(b - a, 3) for a, b in zip(device.attempts, device.attempts[1:], strict=False)]
    assert gaps == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert r.state is ReconnectState.DISCONNECTED  # cancelled while connected: no leak
    assert r.counters.failures == 6 and r.counters.connects == 1


def test_a_lost_connection_is_retried_soon_and_closed_once() -> None:
    device = Device(refusals=0, lasts_s=2)
    r = _run(device, 5)
    assert [round(t, 3) for t in device.attempts[:3]] == [0.0, 2.1, 4.2]  # backoff reset
    assert r.counters.drops == device.closed == 3  # the last one by the cancellation


def test_a_permanent_failure_waits_the_longest_backoff() -> None:
    device = Device(refusals=3, error=type("WrongDevice", (Permanent,), {})("not a shoe"))
    _run(device, 3.5)
    gaps = [round(b - a, 3) for a, b in zip(device.attempts, device.attempts[1:], strict=False)]
    assert gaps[:3] == [1.0, 1.0, 1.0]


def test_the_first_failure_is_loud_and_the_repeats_quiet() -> None:
    with capture_logs() as logs:
        r = _run(Device(refusals=4, lasts_s=100), 3)
    levels = [e["log_level"] for e in logs if e["event"] == "shoe cannot connect"]
    assert r.counters.failures == 4
    assert levels.count("warning") == 1 and levels[0] == "warning"  # the rest at debug


def test_a_bug_is_not_retried() -> None:
    async def main() -> None:
        async def broken() -> str:
            raise KeyError("a bug")

        device = Device(0)
        r = Reconnector("x", broken, device.serve, device.close, retry_on=(OSError,))
        try:
            await r.run()
        except KeyError:
            return
        raise AssertionError("a bug was swallowed")

    run_virtual(main())


def test_next_attempt_time_is_visible_while_waiting() -> None:
    async def main() -> None:
        device = Device(refusals=100)
        r = _reconnector(device)
        task = asyncio.create_task(r.run())
        await asyncio.sleep(0.05)
        assert r.next_attempt_at == 0.1 and r.last_error is not None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    run_virtual(main())
