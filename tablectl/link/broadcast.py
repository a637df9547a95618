"""What a controller publishes about a link: its parameters, its state, each table's answers.

Every controller publishes every link it serves: a table hears the link while any of them
does. The state is retained, for signs and late joiners; the retained copy a broker hands a
new subscriber (its retain flag set) may be a controller's last word long ago, so only a
live broadcast says the link is up (docs/linked-progressives.md, "Link up, link down").
"""

from __future__ import annotations

from datetime import UTC, datetime

from tablectl.link.contract import (
    ClaimAnswer,
    ClaimAnswers,
    LevelState,
    LinkState,
    LinkStateName,
    PendingAward,
    answers_topic,
    parameters_topic,
    state_topic,
)
from tablectl.link.ledger import LinkRow, LinkSnapshot


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def link_state(
    row: LinkRow,
    levels: list[LevelState],
    pending: list[PendingAward],
    *,
    controller_id: str,
    down_reason: str | None = None,
) -> LinkState:
    state: LinkStateName = "up" if row.operating else "closed"
    reason = None if row.operating else "the link is closed (not in operation)"
    if down_reason is not None:
        state, reason = "down", down_reason
    return LinkState(
        link_id=row.link_id,
        version=row.version,
        state=state,
        reason=reason,
        parameters_version=row.parameters_version,
        amount_cents=levels[0].amount_cents if levels else 0,
        levels=levels,
        pending=pending,
        controller_id=controller_id,
        ts=now_text(),
    )


def state_of(snapshot: LinkSnapshot, controller_id: str) -> LinkState:
    return link_state(snapshot.row, snapshot.levels, snapshot.pending, controller_id=controller_id)


def down_state(last: LinkState, controller_id: str, reason: str) -> LinkState:
    """What a controller that cannot write to the ledger says: the last amounts it knew, down."""
    return last.model_copy(
        update={"state": "down", "reason": reason, "controller_id": controller_id, "ts": now_text()}
    )


def answers(
    link_id: str, table_ref: str, version: int, found: list[ClaimAnswer]
) -> tuple[str, bytes]:
    site, _, table = table_ref.partition("/")
    body = ClaimAnswers(link_id=link_id, site=site, table=table, version=version, answers=found)
    return answers_topic(link_id, site, table), body.model_dump_json().encode()


def topics(link_id: str) -> tuple[str, str]:
    return parameters_topic(link_id), state_topic(link_id)
