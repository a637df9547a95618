"""Fault points: a test names one step at which the process dies, as a power cut there would.

`TABLECTL_FAULT_POINT=NAME` (or `NAME#N`, the N-th time that step is reached) makes the
process SIGKILL itself there: no cleanup, no flush, nothing after it runs. The steps are
named where commands to devices pass (docs/design.md, Commands in flight): `after-commit:`
an input type, `effect:` an effect, `send:`/`sent:`/`reply:` a device message type; and in
the journal's commit (store/journal.py): `journal:mark-caught-up`, `journal:rows-written`,
`journal:committed`, `journal:mark-written`. Unset -- always, outside tests -- each point is
one comparison with None.
"""

from __future__ import annotations

import os
import signal

ENV = "TABLECTL_FAULT_POINT"


def _parse(value: str | None) -> tuple[str, str, int] | None:
    if not value:
        return None
    step, _, nth = value.partition("#")
    where, _, what = step.partition(":")
    return where, what, int(nth) if nth else 1


_target = _parse(os.environ.get(ENV))
_reached = 0


def armed() -> str | None:
    """The step a test named, if any (the daemon logs it: never set in production)."""
    return os.environ.get(ENV) if _target is not None else None


def fault_point(where: str, what: str) -> None:
    """Die here if the test named this step, `where:what` (its N-th passage)."""
    global _reached
    if _target is None or what != _target[1] or where != _target[0]:
        return
    _reached += 1
    if _reached == _target[2]:
        os.kill(os.getpid(), signal.SIGKILL)
