"""An independent subscriber for the MQTT benches: its own process, its own connection.

It subscribes (QoS 1) to a topic filter and writes one line per message to stdout:
`<receive time ns (CLOCK_REALTIME)> <topic> <seq or -1> <type or -> <t0 ns or -1>`, where the
payload is either a tablectl event envelope (t0: its `ts`, to the millisecond) or a raw
baseline message `{"t0": ns, "seq": n}`.
With --ack BACKEND it acknowledges each table's contiguous seq every 0.5 s, as a backend
would. It prints `ready` once subscribed and stops on SIGTERM.

Run by bench/mqtt_delivery.py and bench/mqtt_tables.py, not by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from datetime import datetime

import aiomqtt

from tablectl.mqtt.client import SOCKET_OPTIONS


async def main(host: str, port: int, topics: list[str], ack: str | None) -> None:
    contiguous: dict[str, int] = {}
    pending: dict[str, set[int]] = {}
    out = sys.stdout
    async with aiomqtt.Client(host, port, socket_options=SOCKET_OPTIONS) as client:
        for topic in topics:
            await client.subscribe(topic, qos=1)
        print("ready", flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

        async def acker() -> None:
            sent: dict[str, int] = {}
            while True:
                await asyncio.sleep(0.5)
                for root, seq in list(contiguous.items()):
                    if ack and seq > sent.get(root, 0):
                        body = json.dumps({"acked_through_seq": seq})
                        await client.publish(f"{root}/ack/{ack}", body, qos=1, retain=True)
                        sent[root] = seq

        async def receive() -> None:
            async for message in client.messages:
                now = time.time_ns()
                body = json.loads(message.payload)  # type: ignore[arg-type,unused-ignore]
                seq = int(body.get("seq", -1))
                topic_ = str(message.topic)
                t0 = body.get("t0", -1)
                if "ts" in body:  # an event: stamped (to the millisecond) when journaled
                    t0 = int(datetime.fromisoformat(body["ts"]).timestamp() * 1000) * 1_000_000
                out.write(f"{now} {topic_} {seq} {body.get('type', '-')} {t0}\n")
                if len(client.messages) == 0:  # the end of a burst: let the bench see it
                    out.flush()
                if ack and seq > 0:
                    root = topic_.rsplit("/", 1)[0]
                    held = pending.setdefault(root, set())
                    held.add(seq)
                    c = contiguous.get(root, 0)
                    while c + 1 in held:
                        c += 1
                        held.discard(c)
                    contiguous[root] = c

        tasks = [asyncio.create_task(receive()), asyncio.create_task(acker())]
        await stop.wait()
        for task in tasks:
            task.cancel()
        out.flush()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--topic", action="append", required=True)
    p.add_argument("--ack", default=None)
    a = p.parse_args()
    asyncio.run(main(a.host, a.port, a.topic, a.ack))
