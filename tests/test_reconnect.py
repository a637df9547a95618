"""The one reconnect component, on virtual time: when each attempt happens, what is logged."""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any, Protocol

from structlog.testing import capture_logs

from tablectl.mqtt.client import BROKER_RETRY_MAX_S, broker_backoff
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


class Peer(Protocol):
    async def connect(self) -> str: ...
    async def serve(self, conn: str) -> None: ...
    async def close(self, conn: str) -> None: ...


def _reconnector(
    device: Peer, *, name: str = "shoe", initial_s: float = 0.1, max_s: float = 1.0
) -> Reconnector[str]:
    return Reconnector(
        name=name,
        connect=device.connect,
        serve=device.serve,
        close=device.close,
        backoff=Backoff(initial_s=initial_s, max_s=max_s, jitter=0, _rng=random.Random(1)),
        retry_on=(OSError, Permanent),
    )


def _run(device: Peer, seconds: float, **settings: Any) -> Reconnector[str]:
    async def main() -> Reconnector[str]:
        r = _reconnector(device, **settings)
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


class Refused(Permanent):
    """As a broker refusing our credentials says it."""


class Broker:
    """Answers connects with a scripted sequence of outcomes: an exception, or a connection
    that lasts `lasts_s`."""

    def __init__(self, *outcomes: Exception | None, lasts_s: float = 1.0) -> None:
        self.outcomes = list(outcomes)
        self.lasts_s = lasts_s
        self.attempts: list[float] = []

    async def connect(self) -> str:
        self.attempts.append(asyncio.get_running_loop().time())
        outcome = self.outcomes.pop(0) if self.outcomes else ConnectionRefusedError("down")
        if outcome is not None:
            raise outcome
        return "conn"

    async def serve(self, conn: str) -> None:
        await asyncio.sleep(self.lasts_s)
        raise ConnectionResetError("dropped")

    async def close(self, conn: str) -> None:
        return None


def _run_against(broker: Peer, seconds: float) -> Reconnector[str]:
    return _run(broker, seconds, name="mqtt", initial_s=0.5, max_s=30.0)


def test_a_refusal_backs_off_longest_and_is_one_error_while_a_network_failure_is_quiet() -> None:
    refused = Refused("the broker refused the credentials of mqtt.username tcp-07")
    down = ConnectionRefusedError("connection refused")
    broker = Broker(refused, refused, refused, down, down, down, None, lasts_s=1000)
    with capture_logs() as logs:
        r = _run_against(broker, 200)
    gaps = [round(b - a, 3) for a, b in zip(broker.attempts, broker.attempts[1:], strict=False)]
    # Refused: the longest wait each time. Then the broker is down: retried soon, backing off
    # from the start, until it is back.
    assert gaps == [30.0, 30.0, 30.0, 0.5, 1.0, 2.0]
    assert r.counters.refusals == 3 and r.counters.connects == 1
    # Six failures, two of them news (the repeats go to debug, below the log's level): the
    # refusal an error someone must fix, the broker being down a warning.
    failures = [(e["log_level"], e["error"].split(":")[0]) for e in logs if "cannot" in e["event"]]
    assert r.counters.failures == 6
    assert failures == [("error", "Refused"), ("warning", "ConnectionRefusedError")]


def test_a_network_failure_after_a_connection_is_a_warning_once() -> None:
    broker = Broker(None, ConnectionRefusedError("down"), ConnectionRefusedError("down"))
    with capture_logs() as logs:
        r = _run_against(broker, 5)
    assert r.counters.failures >= 2  # it could not connect again, quietly (debug)
    news = [(e["log_level"], e["event"]) for e in logs if e["log_level"] != "info"]
    assert news == [("warning", "mqtt connection lost")]


def test_a_cancellation_swallowed_by_a_failing_connect_still_stops_the_loop() -> None:
    # asyncio.wait_for on Python 3.11 can swallow a cancellation that lands as the awaited
    # operation completes, and raise its failure instead: told to stop, the loop stops.
    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None

        async def connect() -> str:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(1)
            raise ConnectionRefusedError("refused")

        async def never(conn: str) -> None:
            raise AssertionError("never connected")

        r: Reconnector[str] = Reconnector("x", connect, never, never, retry_on=(OSError,))
        try:
            await r.run()
        except asyncio.CancelledError:
            return
        raise AssertionError("the loop ran on after being told to stop")

    run_virtual(main())


class RefusingBroker:
    """Lets every connect in, then refuses what is published in it: as an ACL refuses a
    table that speaks as another (docs/mqtt.md, Security)."""

    def __init__(self) -> None:
        self.attempts: list[float] = []

    async def connect(self) -> str:
        self.attempts.append(asyncio.get_running_loop().time())
        return "conn"

    async def serve(self, conn: str) -> None:
        raise Refused("publish to tablectl/v1/s/tcp-07/birth refused: Not authorized")

    async def close(self, conn: str) -> None:
        return None


def test_a_refusal_after_every_connect_is_one_error_not_one_per_connection() -> None:
    broker = RefusingBroker()
    with capture_logs() as logs:
        r = _run_against(broker, 100)
    assert len(broker.attempts) == 4  # at 0, 30, 60, 90: the longest backoff each time
    assert r.counters.refusals == 4
    errors = [e for e in logs if e["log_level"] == "error"]
    assert [e["event"] for e in errors] == ["mqtt connection lost"]


class Outage:
    """A broker that is not there until `back_at` (virtual seconds), then accepts."""

    def __init__(self, back_at: float) -> None:
        self.back_at = back_at
        self.attempts: list[float] = []

    async def connect(self) -> str:
        now = asyncio.get_running_loop().time()
        self.attempts.append(now)
        if now < self.back_at:
            raise ConnectionRefusedError("nobody listening")
        return "conn"

    async def serve(self, conn: str) -> None:
        await asyncio.sleep(3600)

    async def close(self, conn: str) -> None:
        pass


def test_a_broker_back_from_a_three_minute_outage_is_found_within_seconds() -> None:
    # The relay's backoff for a broker: from 0.25 s doubling to BROKER_RETRY_MAX_S, jittered
    # by a fifth; mqtt.reconnect_max_s (30 s) is a refusal's wait, not a missing broker's.
    outage = Outage(back_at=180.0)

    async def main() -> Reconnector[str]:
        r = Reconnector(
            name="mqtt broker",
            connect=outage.connect,
            serve=outage.serve,
            close=outage.close,
            backoff=broker_backoff(30.0),
            refused_wait_s=30.0,
            retry_on=(OSError,),
        )
        task = asyncio.create_task(r.run())
        await asyncio.sleep(200)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return r

    r = run_virtual(main())
    gaps = [b - a for a, b in zip(outage.attempts, outage.attempts[1:], strict=False)]
    assert max(gaps) <= BROKER_RETRY_MAX_S * 1.2
    found = outage.attempts[-1]
    assert outage.back_at <= found <= outage.back_at + BROKER_RETRY_MAX_S * 1.2
    assert r.counters.connects == 1 and r.counters.failures == len(outage.attempts) - 1


def test_a_refusal_waits_its_own_time_not_the_network_backoff() -> None:
    device = Device(refusals=3, error=type("Refused", (Permanent,), {})("bad certificate"))

    async def main() -> None:
        r = Reconnector(
            name="mqtt broker",
            connect=device.connect,
            serve=device.serve,
            close=device.close,
            backoff=Backoff(initial_s=0.25, max_s=2, jitter=0),
            refused_wait_s=30.0,
            retry_on=(OSError, Permanent),
        )
        task = asyncio.create_task(r.run())
        await asyncio.sleep(100)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    run_virtual(main())
    gaps = [round(b - a, 3) for a, b in zip(device.attempts, device.attempts[1:], strict=False)]
    assert gaps[:3] == [30.0, 30.0, 30.0]
