"""SHUFFLE SUSPECT: the fault the shuffle-integrity monitor raises, and its acknowledgement.

The monitor (service/shuffle_monitor.py, statistics in core/shuffle_integrity/) reports a
deck use whose order fails a test; the core journals it as a fault that stands until a floor
supervisor acknowledges it (`tablectl shuffle acknowledge --by ID`) or takes the shuffler out
of service (`--out-of-service`: no shuffle is asked of it until `--in-service`). Whether the
fault stops rounds is the config's choice (`[shuffle_integrity] on_alarm`, default: alarm
only). 649a.5(a), 653a.5(a), 643a.5(a): the cards are shuffled "so that the cards are
randomly intermixed". Pure.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from tablectl.core import effects as rec
from tablectl.core.events import ShuffleAcknowledged, ShuffleSuspected
from tablectl.util.frozen import trusted


class Suspect(BaseModel):
    """The standing alarm: the test that fired, on which deck use, its figure and p-value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    deck: str
    round_id: int
    test: str
    figure: str
    p_value: float
    alpha: float
    blocks: bool


class ShuffleFault(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    suspect: Suspect | None = None
    out_of_service: bool = False  # a floor supervisor took the shuffler out of service

    @property
    def holds_rounds(self) -> bool:
        return self.out_of_service or (self.suspect is not None and self.suspect.blocks)


class NotNow(ValueError):
    """The command does not apply to the fault as it stands (the message says why)."""


def suspected(
    fault: ShuffleFault, event: ShuffleSuspected, chapter: str
) -> tuple[ShuffleFault, list[rec.Record]]:
    """A new alarm replaces a standing one (the newest evidence shows)."""
    suspect = Suspect(
        deck=event.deck,
        round_id=event.round_id,
        test=event.test,
        figure=event.figure,
        p_value=event.p_value,
        alpha=event.alpha,
        blocks=event.block,
    )
    record = trusted(
        rec.ShuffleSuspect,
        deck=event.deck,
        round_id=event.round_id,
        test=event.test,
        figure=event.figure,
        p_value=event.p_value,
        alpha=event.alpha,
        blocks=event.block,
        rule=f"{chapter}.5(a)",
    )
    return ShuffleFault(suspect=suspect, out_of_service=fault.out_of_service), [record]


def acknowledged(
    fault: ShuffleFault, event: ShuffleAcknowledged
) -> tuple[ShuffleFault, list[rec.Record]]:
    test = None if fault.suspect is None else fault.suspect.test
    if event.action == "in-service":
        if not fault.out_of_service:
            raise NotNow("the shuffler is in service already")
        after = ShuffleFault(suspect=fault.suspect, out_of_service=False)
    elif fault.suspect is None:
        raise NotNow("no SHUFFLE SUSPECT stands: nothing to acknowledge")
    else:
        after = ShuffleFault(out_of_service=event.action == "out-of-service")
    return after, [trusted(rec.ShuffleSuspectCleared, action=event.action, test=test, by=event.by)]
