"""A linked table's core, pure: parameters, LINK DOWN, contributions at the count, claims
answered by the controller; and the rule that decides LINK DOWN, on the shell's clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from tablectl import cli
from tablectl.config import ConfigError, TableConfig, load_config
from tablectl.core import effects as rec
from tablectl.core.effects import Lamp, SeatLamp
from tablectl.core.events import (
    Event,
    LinkClaimAnswer,
    LinkLevelTerms,
    LinkLost,
    LinkParametersHeard,
    LinkRestored,
    LinkRules,
    TableRules,
    ValidateHit,
    VoidRound,
)
from tablectl.core.link_watch import LinkWatch
from tablectl.core.table import Phase, Rejected, TableState
from tablectl.link.contract import (
    ClaimAnswer,
    ClaimAnswers,
    LevelParameters,
    LinkParameters,
    LinkState,
    answers_topic,
    parameters_topic,
    state_topic,
    table_topic,
)
from tablectl.rules.meters import LinkedMeter
from tablectl.service.link import TableLink

from .test_table_core import chip, collected, lockout, opened, records, run, settle, tcp, uth

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "three-card-poker.toml"
REF = "pa-demo-casino/tcp-07"
LINKED = tcp(wager="5.00").model_copy(
    update={"link": LinkRules(link_id="bank", table_ref=REF, link_timeout_ms=5000)}
)


def parameters(version: int = 1, changes: dict[str, object] | None = None) -> LinkParametersHeard:
    fields: dict[str, object] = {
        "link_id": "bank",
        "parameters_version": version,
        "parameters_sha256": f"sha-{version}",
        "game": "three-card-poker",
        "paytable": "A",
        "wager_cents": 500,
        "tables": (REF, "pa-demo-casino/tcp-08"),
        "levels": (
            LinkLevelTerms(
                level_id="progressive",
                contribution_rate_bp=1400,
                initial_cents=100_000,
                reset_cents=100_000,
            ),
        ),
        **(changes or {}),
    }
    return LinkParametersHeard.model_validate(fields)


def on_the_link() -> TableState:
    state, _ = run([*opened(LINKED), parameters(), LinkRestored(heard="state")], rules=LINKED)
    return state


def test_a_linked_table_is_link_down_until_it_has_parameters_and_hears_the_link() -> None:
    state, effects = run([*opened(LINKED), chip(2)], rules=LINKED)
    assert isinstance(state.meter, LinkedMeter) and state.link_down is not None
    assert state.phase is Phase.BETTING and not state.accepting_wagers
    (refused,) = records(effects, rec.WagerRejected)
    assert (refused.reason, refused.rule) == ("link-down", "5321.18(c)")
    assert SeatLamp(seat=2, lamp=Lamp.ON) not in effects
    state, effects = run([parameters(), LinkRestored(heard="state")], rules=LINKED, state=state)
    assert state.link_down is None and state.accepting_wagers
    assert records(effects, rec.LinkParametersAccepted)[0].levels == ["progressive:1400"]
    assert records(effects, rec.LinkUp)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"link_id": "other"}, "this table is on bank"),
        ({"tables": ("pa-demo-casino/tcp-08",)}, "does not list this table"),
        ({"wager_cents": 100}, "this table takes 500"),
        ({"game": "ultimate-texas-holdem"}, "this table plays three-card-poker"),
    ],
)
def test_parameters_that_do_not_fit_the_table_are_refused_with_the_rule(
    changes: dict[str, object], reason: str
) -> None:
    state, effects = run([*opened(LINKED), parameters(changes=changes)], rules=LINKED)
    (refused,) = records(effects, rec.LinkParametersRefused)
    assert reason in refused.reason and refused.rule.startswith("5321.18(b)")
    assert state.link_down is not None and reason in state.link_down


def test_parameters_cannot_change_while_the_link_is_in_operation() -> None:
    state = on_the_link()
    state, effects = run([parameters(version=2)], rules=LINKED, state=state)
    (refused,) = records(effects, rec.LinkParametersRefused)
    assert refused.rule == "5321.18(b)(4)" and state.link_down is not None
    # Once the link is out of operation (closed, or lost), the new version is taken.
    state, effects = run(
        [LinkLost(reason="the link is closed", silent_ms=0), parameters(version=2)],
        rules=LINKED,
        state=state,
    )
    assert isinstance(state.meter, LinkedMeter) and state.meter.parameters_version == 2
    assert state.link_refused is None


def test_contributions_are_journaled_at_the_count_for_every_level() -> None:
    state = on_the_link()
    state, effects = run([chip(2), chip(5), lockout(), *collected(2, 5)], rules=LINKED, state=state)
    contributions = records(effects, rec.LinkContribution)
    assert [(c.seat, c.level_id, c.contribution_ten_thousandths_cent) for c in contributions] == [
        (2, "progressive", 500 * 1400),
        (5, "progressive", 500 * 1400),
    ]
    assert not records(effects, rec.MeterContribution)
    # The cut-off: the rows come before the count is final.
    kinds = [type(e) for e in effects if isinstance(e, rec.Record)]
    assert kinds.index(rec.WagersCounted) > kinds.index(rec.LinkContribution)


def test_a_void_after_the_count_reverses_each_of_the_rounds_contributions_on_the_link() -> None:
    two_levels = parameters(
        changes={
            "levels": (
                LinkLevelTerms(
                    level_id="progressive",
                    contribution_rate_bp=1400,
                    initial_cents=100_000,
                    reset_cents=100_000,
                ),
                LinkLevelTerms(
                    level_id="mini", contribution_rate_bp=37, initial_cents=5000, reset_cents=5000
                ),
            )
        }
    )
    state, _ = run([*opened(LINKED), two_levels, LinkRestored(heard="state")], rules=LINKED)
    state, effects = run([chip(2), chip(5), lockout(), *collected(2, 5)], rules=LINKED, state=state)
    contributed = records(effects, rec.LinkContribution)
    assert len(contributed) == 4
    state, effects = run([VoidRound(reason="shoe-jam", by="dealer-1")], rules=LINKED, state=state)
    reversed_ = records(effects, rec.LinkContributionReversed)
    # One reversal per contribution, naming it and carrying its exact amount and the rule.
    assert [
        (r.round_id, r.seat, r.level_id, r.parameters_version, r.contribution_ten_thousandths_cent)
        for r in reversed_
    ] == [
        (c.round_id, c.seat, c.level_id, c.parameters_version, c.contribution_ten_thousandths_cent)
        for c in contributed
    ]
    assert [r.contribution_ten_thousandths_cent for r in reversed_] == [
        500 * 1400,
        500 * 37,
        500 * 1400,
        500 * 37,
    ]
    assert {(r.reason, r.rule) for r in reversed_} == {("shoe-jam", "649a.13(f)")}
    (voided,) = records(effects, rec.RoundVoided)
    assert voided.contribution_reversed_ten_thousandths_cent == 2 * 500 * (1400 + 37)
    # The reversals are journaled before the void itself, and the next void reverses nothing.
    kinds = [type(e) for e in effects if isinstance(e, rec.Record)]
    assert kinds.index(rec.RoundVoided) > kinds.index(rec.LinkContributionReversed)
    assert state.round_link_contributions == () and state.phase is Phase.CLOSED


def test_a_counted_rounds_contributions_survive_a_restart_and_a_later_void_reverses_them() -> None:
    state = on_the_link()
    state, _ = run([chip(2), lockout(), *collected(2)], rules=LINKED, state=state)
    saved = TableState.model_validate_json(state.model_dump_json())  # the daemon's saved state
    assert saved == state and len(saved.round_link_contributions) == 1
    _, effects = run([VoidRound(reason="shoe-jam")], rules=LINKED, state=saved)
    (reversal,) = records(effects, rec.LinkContributionReversed)
    assert (reversal.seat, reversal.contribution_ten_thousandths_cent) == (2, 500 * 1400)


def test_a_void_before_the_count_reverses_nothing_on_the_link() -> None:
    state = on_the_link()
    state, effects = run([chip(2), VoidRound(reason="shoe-jam")], rules=LINKED, state=state)
    assert not records(effects, rec.LinkContributionReversed)
    (voided,) = records(effects, rec.RoundVoided)
    assert voided.contribution_reversed_ten_thousandths_cent == 0


def test_a_settled_round_keeps_its_contributions() -> None:
    state = on_the_link()
    state, _ = run([chip(2), lockout(), *collected(2)], rules=LINKED, state=state)
    assert len(state.round_link_contributions) == 1
    state, effects = run([settle(s2="2c3d5h")], rules=LINKED, state=state)
    assert state.round_link_contributions == ()
    assert not records(effects, rec.LinkContributionReversed)


def test_link_loss_withdraws_uncounted_wagers_and_refuses_new_ones_the_game_goes_on() -> None:
    state = on_the_link()
    state, effects = run(
        [chip(2), LinkLost(reason="silence", silent_ms=5000), chip(3)], rules=LINKED, state=state
    )
    (down,) = records(effects, rec.LinkDown)
    assert down.wagers_withdrawn == [2] and down.rule == "5321.18(c)"
    assert state.wagers == {} and SeatLamp(seat=2, lamp=Lamp.OFF) in effects
    assert records(effects, rec.WagerRejected)[0].reason == "link-down"
    # The base game: the round locks, settles and the next one opens.
    state, _ = run([lockout(), *collected(3), settle()], rules=LINKED, state=state)
    assert state.phase is Phase.CLOSED


def test_a_claim_is_pending_until_the_controller_answers_and_is_paid_its_amount() -> None:
    state = on_the_link()
    state, _ = run([chip(5), lockout(), *collected(5)], rules=LINKED, state=state)
    state, effects = run(
        [LinkLost(reason="silence", silent_ms=5000), settle(s5="AsKsQs")], rules=LINKED, state=state
    )
    (claim,) = records(effects, rec.LinkClaim)
    assert (claim.claim_id, claim.seat, claim.cards, claim.share_percent) == (
        "1-5",
        5,
        "AsKsQs",
        100,
    )
    assert not records(effects, rec.JackpotHit) and not records(effects, rec.MeterReset)
    (hit,) = state.hits_pending
    assert hit.link_claim and not hit.answered
    with pytest.raises(Rejected, match="JACKPOT PENDING"):
        run([ValidateHit(hit_id="1-5")], rules=LINKED, state=state)
    state, effects = run(
        [LinkClaimAnswer(claim_id="1-5", status="awarded", amount_cents=123_456, award_version=9)],
        rules=LINKED,
        state=state,
    )
    assert records(effects, rec.LinkClaimAnswered)[0].amount_cents == 123_456
    assert state.hits_pending[0].amount_cents == 123_456 and state.hits_pending[0].answered
    state, _ = run([ValidateHit(hit_id="1-5")], rules=LINKED, state=state)
    assert state.hits_pending[0].validated_by is not None
    with pytest.raises(Rejected, match="awaits"):
        run([LinkClaimAnswer(claim_id="1-5", status="refused")], rules=LINKED, state=state)


def test_an_unlinked_table_keeps_its_state_and_records_as_before() -> None:
    rules = tcp()
    state, _ = run(opened(rules), rules=rules)
    assert "link" not in rules.model_dump_json()
    assert "link_silent" not in state.model_dump_json()


def test_the_watch_says_link_down_after_the_timeout_and_up_on_a_live_broadcast() -> None:
    watch = LinkWatch(timeout_ms=5000)
    assert watch.decide(0) is None  # the core starts silent: nothing to tell
    watch.heard_state(100, "up", retained=True)  # a dead controller's last word
    assert watch.decide(100) is None
    watch.heard_state(200, "up", retained=False)
    assert isinstance(watch.decide(200), LinkRestored)
    watch.heard_ack(4000)
    assert watch.decide(9000) is None  # heard within 5 s
    lost = watch.decide(9001)
    assert isinstance(lost, LinkLost) and lost.silent_ms == 5001
    assert watch.decide(9500) is None  # told once
    watch.heard_state(9600, "up", retained=False)
    assert isinstance(watch.decide(9600), LinkRestored)
    watch.heard_state(9700, "closed", retained=False)
    closed = watch.decide(9700)
    assert isinstance(closed, LinkLost) and closed.reason == "the link is closed"
    watch.heard_ack(9800)  # an ack does not reopen a closed link
    assert watch.decide(9800) is None


def test_rules_with_a_link_round_trip_and_old_rules_read_without_one() -> None:
    assert TableRules.model_validate_json(LINKED.model_dump_json()) == LINKED
    assert TableRules.model_validate_json(tcp().model_dump_json()).link is None


# --- the config's [progressive] section -----------------------------------------------------


def test_progressive_link_registers_the_link_backend_and_goes_into_the_rules(
    tmp_path: Path,
) -> None:
    path = tmp_path / "table.toml"
    path.write_text(EXAMPLE.read_text() + '\n[progressive]\nlink = "bank"\n')
    config = load_config(path)
    assert config.mqtt.backends == ["pgs", "link"]  # rows wait for the controllers' acks
    assert config.rules().link == LinkRules(link_id="bank", table_ref=REF, link_timeout_ms=5000)


@pytest.mark.parametrize(
    ("section", "named"),
    [
        ('link = "bank"\nlink_timeout_ms = 500\n', "progressive.link_timeout_ms"),
        ('link = "no spaces"\n', "progressive.link"),
        ('link = "bank"\nrate = 1\n', "progressive.rate"),
    ],
)
def test_a_bad_progressive_section_is_named_and_exits_2(
    tmp_path: Path, section: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "table.toml"
    path.write_text(EXAMPLE.read_text() + "\n[progressive]\n" + section)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert any(named in line for line in caught.value.errors), caught.value.errors
    assert cli.main(["config", "check", str(path)]) == 2


def test_a_game_without_a_meter_cannot_be_linked(tmp_path: Path) -> None:
    path = tmp_path / "table.toml"
    path.write_text(
        (EXAMPLE.parent / "let-it-ride.toml").read_text() + '\n[progressive]\nlink = "bank"\n'
    )
    with pytest.raises(ConfigError, match=r"progressive\.link: a let-it-ride table has no"):
        load_config(path)


# --- the listener: what the controllers' messages become ------------------------------------


def _linked_config(tmp_path: Path) -> TableConfig:
    path = tmp_path / "table.toml"
    path.write_text(EXAMPLE.read_text() + '\n[progressive]\nlink = "bank"\n')
    return load_config(path)


def _link_parameters() -> LinkParameters:
    return LinkParameters(
        link_id="bank",
        title="Mini Royal",
        game="three-card-poker",
        paytable="A",
        wager_cents=100,  # the example table's wager
        hit_policy="ordered",
        simultaneous_window_ms=1000,
        link_timeout_ms=5000,
        broadcast_interval_ms=200,
        backend_id="link",
        tables=[REF],
        levels=[
            LevelParameters(
                level_id="progressive",
                title="Mini Royal",
                rate_bp=1400,
                initial_cents=100_000,
                reset_cents=100_000,
            )
        ],
        parameters_version=1,
        parameters_sha256="sha-1",
    )


def _link_state(state: str = "up") -> bytes:
    return (
        LinkState(
            link_id="bank",
            version=3,
            state=state,  # type: ignore[arg-type]
            parameters_version=1,
            amount_cents=100_070,
            levels=[],
            pending=[],
            controller_id="c1",
            ts="2026-12-03T17:00:00.000Z",
        )
        .model_dump_json()
        .encode()
    )


def test_the_listener_posts_only_changes_and_never_trusts_a_retained_word(tmp_path: Path) -> None:
    config = _linked_config(tmp_path)
    rules = config.rules()
    posted: list[Event] = []
    now = [0]
    held: list[TableState] = [run(opened(rules), rules=rules)[0]]

    def post(event: Event) -> None:  # the daemon's queue, stepped at once
        posted.append(event)
        held[0] = run([event], rules=rules, state=held[0])[0]

    link = TableLink(config, post, lambda: held[0], clock_ms=lambda: now[0])
    ack = table_topic("pa-demo-casino", "tcp-07", "ack/link")

    link.receive(ack, b'{"acked_through_seq": 7}', retained=True)
    link.receive(state_topic("bank"), _link_state(), retained=True)
    assert posted == []  # retained copies: amounts shown, the link not put up
    assert link.link_state is not None and link.link_state.amount_cents == 100_070

    parameters = _link_parameters().model_dump_json().encode()
    link.receive(parameters_topic("bank"), parameters, retained=True)
    (heard,) = posted
    assert isinstance(heard, LinkParametersHeard) and heard.parameters_version == 1
    link.check()
    assert len(posted) == 1  # once: the core holds them now

    link.receive(ack, b'{"acked_through_seq": 8}', retained=False)
    assert isinstance(posted[-1], LinkRestored) and posted[-1].heard == "ack"
    assert held[0].link_down is None and link.view(held[0]).state == "up"
    now[0] = 5001
    link.check()
    assert isinstance(posted[-1], LinkLost) and held[0].link_down is not None
    assert link.view(held[0]).state == "LINK DOWN"
    link.receive(state_topic("bank"), _link_state(), retained=False)
    assert isinstance(posted[-1], LinkRestored) and posted[-1].heard == "state"
    assert len(posted) == 4  # parameters, up, down, up: nothing else

    # An answer is posted for a claim the core holds pending, once.
    held[0] = run(
        [chip(5), lockout(), *collected(5), settle(s5="AsKsQs")], rules=rules, state=held[0]
    )[0]
    answers = ClaimAnswers(
        link_id="bank",
        site="pa-demo-casino",
        table="tcp-07",
        version=9,
        answers=[ClaimAnswer(claim_id="1-5", seq=40, status="refused", reason="not a winner")],
    )
    link.receive(
        answers_topic("bank", "pa-demo-casino", "tcp-07"),
        answers.model_dump_json().encode(),
        retained=True,  # answers are the controller's record: a retained one counts
    )
    link.check()
    (answer,) = posted[4:]
    assert isinstance(answer, LinkClaimAnswer) and answer.status == "refused"
    assert held[0].hits_pending[0].answered and held[0].hits_pending[0].amount_cents == 0


def test_a_uth_straight_flush_claims_ten_percent_of_the_links_meter() -> None:
    """653a.12(d)(1): a share of the meter is claimed as such; the controller pays it."""
    rules = uth().model_copy(
        update={"link": LinkRules(link_id="bank", table_ref=REF, link_timeout_ms=5000)}
    )
    uth_parameters = parameters(
        changes={"game": "ultimate-texas-holdem", "paytable": None, "wager_cents": 100}
    )
    events = [*opened(rules), uth_parameters, LinkRestored(heard="ack")]
    state, _ = run([*events, chip(3), lockout(), *collected(3)], rules=rules)
    state, effects = run([settle("7h6h5h2c3d", s3="9h8h")], rules=rules, state=state)
    (claim,) = records(effects, rec.LinkClaim)
    assert (claim.share_percent, claim.hand, claim.rule) == (10, "straight-flush", "653a.12(d)")
    assert not records(effects, rec.MeterSharePaid) and not records(effects, rec.JackpotHit)
    (hit,) = state.hits_pending
    assert hit.link_claim and not hit.paid_from_table_inventory
