"""A linked table's ear on its link: the controllers' broadcasts, turned into core inputs.

The table's rows (`link.contribution`, `link.claim`, `jackpot.validated`) go out through the
relay like every other row, and stay until the link's backend acks them. This component
listens, on a connection of its own, to what the link controllers publish for the table
(docs/linked-progressives.md): the parameters (retained), the state (at least once a second),
the answers to its claims, and the acks on its own `ack/{backend_id}`. It feeds the pure
`LinkWatch` with the times it hears them and posts to the core only what the core decides
on: the link lost or back, parameters that differ from the ones it holds, an answer to a
claim still pending. The latest state broadcast is kept for display (the link's meter,
JACKPOT PENDING at any table of the link); money is never taken from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable

import structlog
from pydantic import ValidationError

from tablectl.config import TableConfig
from tablectl.core.events import (
    Event,
    LinkClaimAnswer,
    LinkLevelTerms,
    LinkParametersHeard,
)
from tablectl.core.link_watch import LinkWatch
from tablectl.core.table import TableState
from tablectl.link.contract import (
    ClaimAnswer,
    ClaimAnswers,
    LinkParameters,
    LinkState,
    answers_topic,
    parameters_topic,
    state_topic,
    table_topic,
)
from tablectl.mqtt.client import MqttClient, MqttError, broker_reconnector, client_for
from tablectl.rules.meters import LinkedMeter
from tablectl.status import LinkLevel, LinkPending, LinkView

log = structlog.get_logger(__name__)
CHECK_S = 0.2  # how often the watch is asked: LINK DOWN within the timeout plus this


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class TableLink:
    def __init__(
        self,
        config: TableConfig,
        post: Callable[[Event], None],
        state: Callable[[], TableState | None],
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        assert config.progressive is not None
        self.config = config
        self.section = config.progressive
        self.link_id = config.progressive.link
        self.site, self.table = config.table.site_id, config.table.table_id
        self._post = post
        self._state = state
        self._clock_ms = clock_ms
        self.watch = LinkWatch(config.progressive.link_timeout_ms)
        self.parameters: LinkParameters | None = None
        self.link_state: LinkState | None = None
        self.answers: dict[str, ClaimAnswer] = {}
        self.connected = False
        self.messages_refused = 0
        # Posted and not yet seen in the state: not posted again meanwhile.
        # ... or until the round moves on (parameters are not taken in the middle of one).
        self._posted_parameters: tuple[int, str, int, str] | None = None
        self._posted_answers: set[str] = set()
        self._wake = asyncio.Event()

    @property
    def ack_topic(self) -> str:
        return table_topic(self.site, self.table, f"ack/{self.section.backend_id}")

    # --- what it hears ------------------------------------------------------------------

    def receive(self, topic: str, payload: bytes, *, retained: bool) -> None:
        now = self._clock_ms()
        try:
            if topic == self.ack_topic:
                if not isinstance(json.loads(payload)["acked_through_seq"], int):
                    raise TypeError("acked_through_seq is not an integer")
                if not retained:  # a retained ack may be a dead controller's last word
                    self.watch.heard_ack(now)
            elif topic == parameters_topic(self.link_id):
                self.parameters = LinkParameters.model_validate_json(payload)
            elif topic == state_topic(self.link_id):
                state = LinkState.model_validate_json(payload)
                if self.link_state is None or state.version >= self.link_state.version:
                    self.link_state = state
                self.watch.heard_state(now, state.state, retained=retained)
            elif topic == answers_topic(self.link_id, self.site, self.table):
                for answer in ClaimAnswers.model_validate_json(payload).answers:
                    self.answers[answer.claim_id] = answer
        except (ValidationError, ValueError, KeyError, TypeError) as exc:
            self.messages_refused += 1
            log.warning("link message refused", topic=topic, error=str(exc)[:200])
            return
        self.check()

    # --- what the core hears -------------------------------------------------------------

    def check(self) -> None:
        """Post to the core what changed: the link up or down, parameters, answers."""
        state = self._state()
        if state is None:
            return
        decision = self.watch.decide(self._clock_ms())
        if decision is not None:
            log.warning("link", link=self.link_id, change=decision.TYPE)
            self._post(decision)
            self._posted_parameters = None  # in or out of operation: offer them again
        meter = state.meter
        if not isinstance(meter, LinkedMeter):
            return
        p = self.parameters
        if p is not None:
            key = (p.parameters_version, p.parameters_sha256)
            held = (meter.parameters_version, meter.parameters_sha256)
            posted = (*key, state.round_id, state.phase.value)
            if key != held and posted != self._posted_parameters:
                self._posted_parameters = posted
                self._post(_heard(p))
        for hit in state.hits_pending:
            if not hit.link_claim or hit.answered or hit.hit_id in self._posted_answers:
                continue
            answer = self.answers.get(hit.hit_id)
            if answer is None:
                continue
            self._posted_answers.add(hit.hit_id)
            self._post(_answer(answer))

    async def run(self) -> None:
        """Listen (reconnecting) and check the watch every CHECK_S, connected or not."""
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._listen(), name="link-listen")
            while True:
                self.check()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(CHECK_S):
                        await self._wake.wait()
                self._wake.clear()

    async def _listen(self) -> None:
        """Its own connection, through the one reconnect component (util/reconnect.py)."""
        c = self.config.mqtt
        await broker_reconnector(
            f"link listener on mqtt broker {c.host}:{c.port}",
            self._connect,
            self._session,
            self._close,
            refused_wait_s=c.reconnect_max_s,
        ).run()

    async def _connect(self) -> MqttClient:
        c = self.config.mqtt
        client = client_for(
            c, client_id=f"{c.client_id or f'tablectl-{self.site}-{self.table}'}-link"
        )
        await client.connect()
        return client

    async def _close(self, client: MqttClient) -> None:
        self.connected = False
        client.close()

    async def _session(self, client: MqttClient) -> None:
        for topic in (
            parameters_topic(self.link_id),
            state_topic(self.link_id),
            answers_topic(self.link_id, self.site, self.table),
            self.ack_topic,
        ):
            await client.subscribe(topic)
        self.connected = True
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(client.wait_closed(), name="link-connection")
                async for message in client.messages():
                    if isinstance(message.payload, bytes | bytearray) and message.payload:
                        self.receive(message.topic, bytes(message.payload), retained=message.retain)
        except* MqttError as group:
            raise group.exceptions[0] from None

    # --- what people see -----------------------------------------------------------------

    def view(self, state: TableState) -> LinkView:
        """The link as `tablectl status` shows it: LINK DOWN, the link's meter, pending."""
        down = state.link_down
        s = self.link_state
        heard = self.watch.last_heard_ms
        return LinkView(
            link_id=self.link_id,
            state="LINK DOWN" if down is not None else "up",
            reason=down,
            broker_connected=self.connected,
            last_heard_ms_ago=None if heard is None else max(0, self._clock_ms() - heard),
            controllers_say=None
            if s is None
            else s.state + (f": {s.reason}" if s.reason and s.state != "up" else ""),
            amounts_as_of=None if s is None else s.ts,
            parameters_version=None
            if self.parameters is None
            else self.parameters.parameters_version,
            amount_cents=None if s is None else s.amount_cents,
            levels=[]
            if s is None
            else [
                LinkLevel(
                    level_id=lv.level_id,
                    title=lv.title,
                    amount_cents=lv.amount_cents,
                    amount_units=lv.amount_units,
                    reset_cents=lv.reset_cents,
                )
                for lv in s.levels
            ],
            jackpot_pending=[]
            if s is None
            else [
                LinkPending(table=f"{p.site}/{p.table}", seat=p.seat, amount_cents=p.amount_cents)
                for p in s.pending
            ],
            messages_refused=self.messages_refused,
        )


def _heard(p: LinkParameters) -> LinkParametersHeard:
    return LinkParametersHeard(
        link_id=p.link_id,
        parameters_version=p.parameters_version,
        parameters_sha256=p.parameters_sha256,
        game=p.game,
        paytable=p.paytable,
        wager_cents=p.wager_cents,
        tables=tuple(p.tables),
        levels=tuple(
            LinkLevelTerms(
                level_id=lv.level_id,
                contribution_rate_bp=lv.contribution_rate_bp,
                initial_cents=lv.initial_cents,
                reset_cents=lv.reset_cents,
            )
            for lv in p.levels
        ),
    )


def _answer(a: ClaimAnswer) -> LinkClaimAnswer:
    if a.status == "refused" or a.award is None:
        return LinkClaimAnswer(claim_id=a.claim_id, status="refused", reason=a.reason)
    return LinkClaimAnswer(
        claim_id=a.claim_id,
        status="awarded",
        amount_cents=a.award.amount_cents,
        award_version=a.award.award_version,
    )
