"""What every message on the wire is built on: a frozen model with no unknown field, and the
form of an id that goes into a topic level. Pure (the link's terms, link/terms.py, use them
where no I/O may reach)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

# Topic levels we put ids into: no MQTT wildcard or separator can hide in them.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"


class Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
