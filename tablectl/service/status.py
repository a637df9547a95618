"""What technicians and systemd see of a running daemon: the devices, a one-line status.

Built from `Daemon.status()` so there is one source: each device's health (identity, link,
counters), its last fault, the serial number accepted for play and any other one waiting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tablectl.core.round import StuckCause, StuckInput

KNOWN_DEVICES = ("shuffler", "shoe")

STUCK_WHAT = {
    StuckCause.HELD: "held down past gpio.lockout_hold_max_ms",
    StuckCause.NOT_RELEASED: "still down when the next round would open",
    StuckCause.OCCUPIED_ROUNDS: "occupied through more rounds than gpio.sensor_stuck_rounds",
    StuckCause.OCCUPIED_DURING_DEAL: "occupied while the cards were dealt",
}


def stuck_inputs(faults: Iterable[StuckInput]) -> list[dict[str, Any]]:
    """Each stuck input: which, why, since which round, what it blocks, what clears it."""
    out = []
    for fault in faults:
        lockout = fault.seat is None
        out.append(
            {
                "input": fault.input,
                "seat": fault.seat,
                "cause": fault.cause.value,
                "since_round": fault.round_id,
                "what": ("lock-out button " if lockout else f"seat {fault.seat} sensor ")
                + STUCK_WHAT[fault.cause],
                "blocks": "betting" if lockout else f"seat {fault.seat}'s wagers",
                "clear": "free the button, then tablectl dealer clear-fault --lockout --by ID"
                if lockout
                else "lift the chip or repair the sensor, then "
                f"tablectl dealer clear-fault --seat {fault.seat} --by ID",
            }
        )
    return out


def devices(status: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every device the status names, each with at least its link state."""
    found: dict[str, dict[str, Any]] = {}
    acceptance = status.get("device_acceptance") or {}
    for name in KNOWN_DEVICES:
        info = status.get(name)
        if isinstance(info, Mapping):
            found[name] = {**info, **acceptance.get(name, {})}
    shuffler = found.get("shuffler")
    if shuffler is not None and "last_fault" not in shuffler:
        shuffler["last_fault"] = status.get("shuffler_fault")
    gpio = status.get("gpio")
    if isinstance(gpio, Mapping):  # the sensors, lamps and lock-out button
        stuck = [f["what"] for f in status.get("stuck_inputs") or []]
        found["gpio"] = {"link": "fault" if status.get("gpio_fault") else "up", **gpio}
        if stuck:
            found["gpio"]["stuck"] = stuck
    return found


def broker(status: Mapping[str, Any]) -> dict[str, Any]:
    mqtt = status.get("mqtt")
    return dict(mqtt) if isinstance(mqtt, Mapping) else {}


def links(status: Mapping[str, Any]) -> dict[str, str]:
    """name -> "up"/"down" for every device, and the broker as "connected"/"disconnected"."""
    out = {name: str(info.get("link", "unknown")) for name, info in devices(status).items()}
    mqtt = broker(status)
    if mqtt:
        out["broker"] = "connected" if mqtt.get("connected") else "disconnected"
    return out


def status_line(status: Mapping[str, Any]) -> str:
    """systemd's STATUS=: the phase, each device's link, the broker, what blocks the table."""
    phase = status.get("phase", "?")
    parts = [f"{phase} (round {status.get('round_id', '?')})"]
    parts += [
        f"{name} {state}" if name == "broker" else f"{name} link {state}"
        for name, state in links(status).items()
    ]
    blocked = status.get("blocked")
    if blocked:
        parts.append(f"blocked: {blocked}")
    stuck = [f["what"] for f in status.get("stuck_inputs") or []]
    if stuck:
        parts.append("stuck: " + ", ".join(stuck))
    return "; ".join(parts)
