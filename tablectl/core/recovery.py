"""Power-up: a command the journal says was issued and no device confirmed, settled. Pure.

The daemon journals a command (`deal.started`) and sends it only after that commit; a power
cut in between, or before anything the device answered is journaled, leaves the journal
saying "asked" and nothing saying whether the device acted. What the device says first
after the power-up decides (`DeviceResumed`, once the events it held are journaled): its
boot id against the one the command went to, its state, and the events it held past the
journal's cursor. A device keeps every event until it is journaled, so one that is in the
same boot, idle and held no event never acted: the command is issued again. One that is
acting goes on, and its events decide. Anything else cannot show what it did: for a deal,
the round is void under the game's section for a shoe that fails to deal (649a.13(f),
653a.13(f), 643a.13(f)).

SHUFFLE needs no proof: a power-up forgets the deck (`table.state.unverify`), so what the shuffler
did before is journaled stale and a new shuffle is asked for whatever it did (649a.5(b),
649a.13(e)); a shuffler still shuffling refuses it (BUSY) and is asked again. COUNT is a
technician's diagnostic: it changes nothing and the journal never records it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tablectl.core.events import DeviceResumed


class Resolution(StrEnum):
    REISSUE = "reissued"  # the device showed it never acted: asked again, once
    DEALING = "dealing"  # the device is carrying it out: its events decide
    VOID = "voided"  # it cannot show what it did: the round is void


@dataclass(frozen=True, slots=True)
class Decision:
    resolution: Resolution
    why: str


def resolve_deal(*, issued_to_boot: int | None, progressed: bool, shoe: DeviceResumed) -> Decision:
    """A deal in flight at the power-up, against what the shoe said first after it.

    issued_to_boot: the shoe's boot when the deal was journaled (None in journals before it
    was kept: the journal's cursor then names the boot). progressed: the journal holds some
    of the deal (a card, a stack, a card face up).
    """
    boot = issued_to_boot if issued_to_boot is not None else shoe.cursor_boot_id
    if boot is None:
        return Decision(
            Resolution.VOID,
            "the journal names no boot of the shoe to compare with: it cannot show it never dealt",
        )
    if shoe.boot_id != boot:
        return Decision(
            Resolution.VOID,
            f"the shoe restarted (boot {boot} when asked, {shoe.boot_id} now): what it dealt "
            "is lost",
        )
    if shoe.acting:
        return Decision(Resolution.DEALING, f"the shoe is {shoe.state}: its cards decide")
    if shoe.events_held == 0 and not progressed:
        return Decision(
            Resolution.REISSUE,
            f"the shoe is {shoe.state} in the boot it was asked in and held no event past the "
            "journal's: it never dealt",
        )
    return Decision(
        Resolution.VOID,
        f"the shoe is {shoe.state} and the deal is incomplete: it failed to deal all cards",
    )
