"""What a link's rows do to its meters (tablectl/link/book.py): pure, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from tablectl.core.effects import JackpotValidated
from tablectl.link.book import LevelBook, LinkBook, TableRow, initial_events
from tablectl.link.contract import (
    Award,
    LevelParameters,
    LinkClaim,
    LinkContribution,
    LinkContributionReversed,
    LinkDefinition,
)

T0 = datetime(2026, 12, 3, 14, 0, tzinfo=UTC)


def definition(
    *, policy: str = "ordered", reserve_bp: int = 0, limit: int | None = None, window_ms: int = 1000
) -> LinkDefinition:
    return LinkDefinition(
        link_id="bank",
        title="Bank",
        game="three-card-poker",
        paytable="A",
        wager_cents=500,
        hit_policy=policy,  # type: ignore[arg-type]
        simultaneous_window_ms=window_ms,
        link_timeout_ms=5000,
        broadcast_interval_ms=500,
        backend_id="link",
        tables=["s/t1", "s/t2", "s/t3"],
        levels=[
            LevelParameters(
                level_id="progressive",
                title="Progressive",
                rate_bp=1400,
                reserve_rate_bp=reserve_bp,
                initial_cents=100_000,
                reset_cents=100_000,
                limit_cents=limit,
            )
        ],
    )


def book(d: LinkDefinition) -> LinkBook:
    b = LinkBook("bank", d, True, 0, 1, {lv.level_id: LevelBook(lv, 0) for lv in d.levels})
    initial_events(b, "{}")
    return b


def contribution(table: str, seq: int, *, rate: int = 1400, wager: int = 500) -> TableRow:
    record = LinkContribution(
        link_id="bank",
        level_id="progressive",
        parameters_version=1,
        round_id=seq,
        seat=1,
        wager_cents=wager,
        rate_bp=rate,
        contribution_ten_thousandths_cent=wager * rate,
    )
    return TableRow(table, seq, record.TYPE, record)


def claim(table: str, seq: int, claim_id: str, share: int = 100, seat: int = 2) -> TableRow:
    record = LinkClaim(
        link_id="bank",
        level_id="progressive",
        parameters_version=1,
        claim_id=claim_id,
        round_id=seq,
        seat=seat,
        hand="mini-royal-flush",
        cards="AsKsQs",
        share_percent=share,
        rule="649a.12(e)",
    )
    return TableRow(table, seq, record.TYPE, record, ts="2026-12-03T14:00:00.000Z")


def award_of(b: LinkBook, version: int) -> Award:
    import json

    event = next(e for e in b.events if e.version == version)
    return Award.model_validate(json.loads(event.detail)["award"])


def test_a_contribution_is_wager_times_rate_to_the_unit() -> None:
    b = book(definition(reserve_bp=100))
    b.apply(contribution("s/t1", 1, rate=1500), T0)
    level = b.levels["progressive"]
    # 14 % to the meter, 1 % to the hidden reserve: 500 x 1400 and 500 x 100 units.
    assert (level.display_units, level.reserve_units) == (100_000 * 10_000 + 700_000, 50_000)
    assert b.events[-1].kind == "contribution" and b.events[-1].balances()


def reversal(table: str, seq: int, round_id: int, *, rate: int = 1500) -> TableRow:
    record = LinkContributionReversed(
        link_id="bank",
        level_id="progressive",
        parameters_version=1,
        round_id=round_id,
        seat=1,
        wager_cents=500,
        rate_bp=rate,
        contribution_ten_thousandths_cent=500 * rate,
        reason="shoe-jam",
        rule="649a.13(f)",
    )
    return TableRow(table, seq, record.TYPE, record)


def test_a_reversal_takes_off_each_pool_what_its_contribution_put_on() -> None:
    b = book(definition(reserve_bp=100, limit=100_050))  # $0.50 of room below the limit
    start = b.levels["progressive"].display_units
    b.apply(contribution("s/t1", 1, rate=1500), T0)  # 50 cents to the meter, 20 overflow
    b.apply(reversal("s/t1", 2, 1), T0)
    event = b.events[-1]
    assert event.kind == "contribution.reversed" and event.balances()
    assert (event.display_units, event.reserve_units, event.overflow_units) == (
        -500_000,
        -50_000,
        -200_000,
    )
    assert event.contribution_units == -750_000 and event.ref_version == b.version - 1
    level = b.levels["progressive"]
    assert (level.display_units, level.reserve_units, level.overflow_units) == (start, 0, 0)
    b.apply(contribution("s/t1", 3, rate=1500), T0)
    b.apply(contribution("s/t1", 4, rate=1500), T0)  # no room left: all 70 cents overflow
    b.apply(reversal("s/t1", 5, 4), T0)
    event = b.events[-1]
    assert event.kind == "contribution.reversed" and event.balances()
    assert (event.display_units, event.reserve_units, event.overflow_units) == (
        0,
        -50_000,
        -700_000,
    )
    assert (level.display_units, level.reserve_units, level.overflow_units) == (
        start + 500_000,
        50_000,
        200_000,
    )
    # Once only: the same contribution again (another seq) is refused, nothing moves.
    b.apply(reversal("s/t1", 6, 4), T0)
    assert b.events[-1].kind == "reversal.refused" and "reversed already" in b.events[-1].detail
    assert level.display_units == start + 500_000


def test_a_reversal_after_a_reset_takes_the_spent_reserve_share_off_the_meter() -> None:
    b = book(definition(reserve_bp=100))
    b.apply(contribution("s/t1", 1, rate=1500), T0)
    b.apply(claim("s/t2", 1, "h"), T0)  # the reset spends the reserve
    level = b.levels["progressive"]
    assert level.reserve_units == 0 and level.display_units == 100_000 * 10_000
    b.apply(reversal("s/t1", 2, 1), T0)
    assert b.events[-1].kind == "contribution.reversed" and b.events[-1].balances()
    assert level.display_units == 100_000 * 10_000 - 750_000


def test_a_contribution_not_matching_the_parameters_is_refused_with_the_reason() -> None:
    b = book(definition())
    before = b.levels["progressive"].display_units
    b.apply(contribution("s/t1", 1, rate=1300), T0)
    b.apply(contribution("s/t1", 2, wager=100), T0)
    assert [e.kind for e in b.events[-2:]] == ["contribution.refused"] * 2
    assert "rate 1300 bp; the level's is 1400" in b.events[-2].detail
    assert "wager 100 cents; the link's is 500" in b.events[-1].detail
    assert b.levels["progressive"].display_units == before


def test_above_the_limit_contributions_overflow_and_the_reset_takes_them_back() -> None:
    b = book(definition(limit=100_010, reserve_bp=600))
    for seq in range(1, 4):
        b.apply(contribution("s/t1", seq, rate=2000), T0)
    level = b.levels["progressive"]
    # 3 x $0.70 for the meter, which stops at its $1,000.10 limit: $2.00 overflows.
    assert level.display_units == 100_010 * 10_000
    assert level.overflow_units == 3 * 500 * 1400 - 10 * 10_000 == 2_000_000
    assert level.reserve_units == 3 * 500 * 600
    b.apply(claim("s/t2", 1, "h1"), T0)
    # The reset is funded first from the reserve, then by the operator; as much overflow as
    # fits under the limit moves back onto the meter, the rest waits for the next reset.
    reset = b.events[-1]
    assert reset.kind == "meter.reset" and reset.balances()
    assert (reset.reserve_units, reset.seed_units) == (-900_000, 100_000 * 10_000 - 900_000)
    assert (reset.overflow_units, reset.display_units) == (-100_000, 100_010 * 10_000)
    assert (level.reserve_units, level.overflow_units) == (0, 1_900_000)
    assert level.display_units == 100_010 * 10_000


def test_ordered_claims_are_paid_in_commit_order_each_from_the_meter_left() -> None:
    b = book(definition())
    for seq in range(1, 11):
        b.apply(contribution("s/t1", seq), T0)
    meter = b.levels["progressive"].cents  # $1,035.00
    b.apply(claim("s/t2", 1, "h1"), T0)
    first = b.version - 1
    b.apply(claim("s/t3", 1, "h1", seat=4), T0 + timedelta(milliseconds=3))
    second = b.version - 1
    a, z = award_of(b, first), award_of(b, second)
    assert (a.amount_cents, a.meter_before_cents, a.order_in_window, a.reset) == (
        meter, meter, 1, True,
    )  # fmt: skip
    assert (z.amount_cents, z.meter_before_cents, z.order_in_window) == (100_000, 100_000, 2)
    assert (z.window_first_version, z.window_locked_cents, z.elapsed_ms) == (first, meter, 3)
    assert b.claims[("s/t3", "h1")].award_version == second


def test_full_amount_each_pays_the_locked_meter_to_every_hit_in_the_window() -> None:
    b = book(definition(policy="full-amount-each", window_ms=500))
    for seq in range(1, 11):
        b.apply(contribution("s/t1", seq), T0)
    meter = b.levels["progressive"].cents
    b.apply(claim("s/t2", 1, "h1"), T0)
    b.apply(claim("s/t3", 1, "h1"), T0 + timedelta(milliseconds=499))
    second = award_of(b, b.version)
    assert (second.amount_cents, second.funded_outside_meter_cents) == (meter, meter)
    assert second.paid_from_meter_cents == 0 and not second.reset
    assert b.levels["progressive"].cents == 100_000  # the first reset it; the second did not
    # Past the window, a hit opens a window of its own and is paid from the meter.
    b.apply(claim("s/t1", 11, "h2"), T0 + timedelta(milliseconds=501))
    third = award_of(b, b.version - 1)
    assert (third.order_in_window, third.amount_cents, third.paid_from_meter_cents) == (
        1, 100_000, 100_000,
    )  # fmt: skip


def test_a_share_leaves_the_rest_on_the_meter_and_is_no_reset() -> None:
    b = book(definition())
    b.apply(contribution("s/t1", 1), T0)
    b.apply(claim("s/t2", 1, "h1", share=10), T0)
    award = award_of(b, b.version)
    assert (award.amount_cents, award.reset) == (10_007, False)  # 10 % of $1,000.70
    assert b.levels["progressive"].display_units == (100_070 - 10_007) * 10_000
    assert b.events[-1].kind == "award"


def test_a_claim_twice_is_refused_and_a_validation_ends_the_pending() -> None:
    b = book(definition())
    b.apply(claim("s/t2", 1, "h1"), T0)
    b.apply(claim("s/t2", 2, "h1"), T0)
    refused = b.events[-1]
    assert refused.kind == "claim.refused" and "already answered" in refused.detail
    b.apply(TableRow("s/t2", 3, "jackpot.validated", JackpotValidated(hit_id="h1", by="f")), T0)
    validated = b.events[-1]
    assert validated.kind == "award.validated" and b.claims[("s/t2", "h1")].validated
    b.apply(TableRow("s/t1", 1, "jackpot.validated", JackpotValidated(hit_id="x", by="f")), T0)
    assert b.events[-1] is validated, "a local hit's validation is none of the link's business"


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["contribute", "claim", "share", "validate"]),
            st.integers(0, 2),
            st.integers(0, 2000),
        ),
        max_size=60,
    ),
    policy=st.sampled_from(["ordered", "full-amount-each"]),
    reserve=st.sampled_from([0, 300]),
    limit=st.sampled_from([None, 100_500]),
)
def test_every_event_balances_and_the_pools_are_their_events_sums(
    ops: list[tuple[str, int, int]], policy: str, reserve: int, limit: int | None
) -> None:
    b = book(definition(policy=policy, reserve_bp=reserve, limit=limit))
    seqs = {t: 0 for t in ("s/t1", "s/t2", "s/t3")}
    for i, (op, t, ms) in enumerate(ops):
        table = sorted(seqs)[t]
        seqs[table] += 1
        seq, at = seqs[table], T0 + timedelta(milliseconds=ms + 10 * i)
        if op == "contribute":
            b.apply(contribution(table, seq, rate=1400 + reserve), at)
        elif op in ("claim", "share"):
            b.apply(claim(table, seq, f"c{i}", 100 if op == "claim" else 10), at)
        else:
            validated = JackpotValidated(hit_id=f"c{i - 1}", by="floor")
            b.apply(TableRow(table, seq, "jackpot.validated", validated), at)
    level = b.levels["progressive"]
    assert all(e.balances() for e in b.events)
    assert [e.version for e in b.events] == list(range(1, b.version + 1))
    assert level.display_units == sum(e.display_units for e in b.events)
    assert level.reserve_units == sum(e.reserve_units for e in b.events) >= 0
    assert level.overflow_units == sum(e.overflow_units for e in b.events) >= 0
    if limit is not None:
        assert level.display_units <= limit * 10_000
