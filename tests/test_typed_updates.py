"""The core's state is changed only through typed `replace` methods (and its counters by a
checked name): a misspelt field or a wrong type is a mypy error, not a key pydantic's
`model_copy(update=...)` drops in silence. Each input type has its own handler."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest
from pydantic import BaseModel

from tablectl.core import decks, table
from tablectl.core import effects as rec
from tablectl.core import events as ev
from tablectl.core.events import Event
from tablectl.core.table import state as table_state
from tablectl.rules import meters
from tablectl.util.frozen import replaced, trusted

# Each state model and the TypedDict its `replace` takes.
UPDATES: list[tuple[type[BaseModel], Any]] = [
    (table.TableState, table_state.TableStateUpdate),
    (table.Deal, table_state.DealUpdate),
    (table.HitEntry, table_state.HitEntryUpdate),
    (decks.DeckLife, decks.DeckLifeUpdate),
    (decks.DeckEntry, decks.DeckEntryUpdate),
    (meters.LocalMeter, meters.LocalMeterUpdate),
    (meters.LinkedMeter, meters.LinkedMeterUpdate),
]


@pytest.mark.parametrize(("model", "update"), UPDATES, ids=lambda x: x.__name__)
def test_each_update_names_every_field_with_its_type(model: type[BaseModel], update: Any) -> None:
    """The TypedDict and the model cannot drift apart: a field added to one is in the other."""
    fields = {name: t for name, t in get_type_hints(model).items() if name in model.model_fields}
    assert get_type_hints(update) == fields


# Where the core copies a model with fields changed: the typed `replace` methods, and
# `Counters.bump`, whose one field name is a checked `CounterName`.
COPIES = {
    "return replaced(self, update)",
    'return replaced(self, {name: getattr(self, name) + 1, "happened": happened})',
}


def test_core_state_has_no_untyped_copy() -> None:
    """A model is copied with changes only inside the typed `replace` methods (and `bump`)."""
    root = Path(table.__file__).parents[2]
    for package in ("core", "rules"):
        for path in (root / package).rglob("*.py"):
            for line in path.read_text().splitlines():
                if "model_copy(" in line or re.search(r"\breplaced\(", line):
                    assert line.strip() in COPIES, path


# An instance of each state model, and a change of two of its fields.
COPIED: list[tuple[BaseModel, dict[str, Any]]] = [
    (table.TableState(game="three-card-poker"), {"phase": table.Phase.BETTING, "round_id": 2}),
    (table.Deal(seats=(1, 2), stacks=(3, 3)), {"face_up": 1, "complete": True}),
    (
        table.HitEntry(
            hit_id="1-2",
            round_id=1,
            seat=2,
            hand="mini-royal",
            amount_cents=500,
            basis="odds-for-1",
            paid_from_table_inventory=True,
        ),
        {"validated_by": "floor", "answered": True},
    ),
    (decks.DeckLife(), {"now_ms": 5, "round_deck": "D1"}),
    (decks.DeckEntry(deck_id="D1", back="red", introduced_ms=1), {"warned": True, "back": "b"}),
    (meters.LocalMeter(cents=100), {"cents": 101, "carry": 5}),
    (meters.LinkedMeter(link_id="bank"), {"cents": 5, "parameters_version": 2}),
    (table.Counters(), {"rounds_settled": 1, "happened": ("rounds_settled",)}),
]


@pytest.mark.parametrize(("model", "update"), COPIED, ids=lambda x: type(x).__name__)
def test_replaced_is_model_copy_attribute_by_attribute(
    model: BaseModel, update: dict[str, Any]
) -> None:
    """util/frozen.replaced builds what pydantic's model_copy(update=...) builds, for models
    with no extra fields and no private attributes (every state model is one)."""
    assert type(model).model_config.get("extra") != "allow"
    assert not type(model).__private_attributes__
    mine, theirs = replaced(model, update), model.model_copy(update=update)
    assert type(mine) is type(theirs)
    assert mine.__dict__ == theirs.__dict__
    assert list(mine.__dict__) == list(theirs.__dict__)  # the fields in their order
    assert mine.model_fields_set == theirs.model_fields_set
    assert mine.__pydantic_extra__ is None and theirs.__pydantic_extra__ is None
    assert mine.__pydantic_private__ is None and theirs.__pydantic_private__ is None
    assert mine == theirs and mine.model_dump_json() == theirs.model_dump_json()
    assert model.__dict__ != mine.__dict__  # the original is left as it was


def test_every_state_model_is_in_the_copy_check() -> None:
    assert {type(model) for model, _ in COPIED} == {m for m, _ in UPDATES} | {table.Counters}


def test_mypy_refuses_a_misspelt_field_and_a_wrong_type(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        "from tablectl.core.table import Phase, TableState\n"
        "def f(s: TableState) -> None:\n"
        "    s.replace(phase=Phase.BETTING, round_id=s.round_id + 1)\n"
        "    s.replace(pahse=Phase.BETTING)\n"
        "    s.replace(round_id='2')\n"
        "    s.replace(counters=s.counters.bump('rounds_setled'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(snippet)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == ["4", "5", "6"], done.stdout
    assert 'Unexpected keyword argument "pahse"' in errors[0]
    assert 'Argument "round_id" to "replace" of "TableState" has incompatible type' in errors[1]
    assert 'Argument 1 to "bump" of "Counters" has incompatible type' in errors[2]


def test_every_counter_is_a_field() -> None:
    fields = set(table.Counters.model_fields) - {"happened"}
    assert set(get_args(table.CounterName)) == fields
    assert all(table.Counters.model_fields[name].annotation is int for name in fields)


def test_counters_dump_as_the_mapping_they_replaced() -> None:
    """Only what happened, in the order each first happened: an older journal's state hashes
    were taken of that mapping, whatever order its counters came in."""
    counters = table.Counters().bump("rounds_voided").bump("wagers_rejected")
    counters = counters.bump("rounds_voided")
    assert counters.rounds_voided == 2 and counters.wagers_rejected == 1
    assert counters.rounds_settled == 0
    assert counters.model_dump_json() == '{"rounds_voided":2,"wagers_rejected":1}'
    back = table.Counters.model_validate_json(counters.model_dump_json())
    assert back == counters and back.model_dump_json() == counters.model_dump_json()
    assert table.Counters().model_dump_json() == "{}"
    with pytest.raises(ValueError, match="rounds_setled"):
        table.Counters.model_validate_json('{"rounds_setled":1}')


def test_every_input_type_has_its_handler() -> None:
    """The dispatch table holds a handler for each input type, and for nothing else."""
    assert set(table.HANDLERS) == set(get_args(Event))


def test_the_dispatch_table_is_read_only() -> None:
    """No handler is registered at run time: the table is the module's, fixed at import."""
    with pytest.raises(TypeError):
        table.HANDLERS[object] = table.step  # type: ignore[index]


def _sample(annotation: Any) -> Any:
    """A value of a record field's type, as the core would hold it."""
    samples: dict[Any, Any] = {
        int: 7,
        str: "x",
        bool: True,
        float: 2.5e-9,
        list[int]: [3, 1],
        list[str]: ["a", "b"],
        int | None: 5,
        str | None: "y",
        rec.WagerOutcome: rec.WagerOutcome.FORFEITED,
        rec.MeterReading: rec.MeterReading(meter_id="p", meter_cents=100, meter_carry=3),
        rec.MeterReading | None: rec.MeterReading(meter_id="p", meter_cents=1, meter_carry=0),
        tuple[int, ...]: (2, 5),
        tuple[int, ...] | None: (1,),
    }
    return samples[annotation]


TRUSTED = [cls for cls in rec.RECORD_TYPES.values() if not issubclass(cls, rec.LinkRecord)]
# The inputs the GPIO driver builds trusted (drivers/gpio/table_io.py).
GPIO_INPUTS = [ev.ChipSensed, ev.LockoutPressed, ev.LockoutReleased, ev.LockoutHeld]


@pytest.mark.parametrize(
    "cls", [*TRUSTED, *GPIO_INPUTS, rec.MeterReading], ids=lambda c: c.__name__
)
@pytest.mark.parametrize("every_field", [True, False], ids=["every-field", "required-only"])
def test_a_trusted_record_is_the_one_validation_builds(
    cls: type[BaseModel], every_field: bool
) -> None:
    """util/frozen.trusted builds, from values of the right types, the instance pydantic's
    validation builds: the same fields in the same order, fields set and JSON."""
    hints = get_type_hints(cls)
    fields = {
        name: _sample(hints[name])
        for name, info in cls.model_fields.items()
        if every_field or info.is_required()
    }
    mine, theirs = trusted(cls, **fields), cls(**fields)
    assert type(mine) is cls
    assert list(mine.__dict__.items()) == list(theirs.__dict__.items())
    assert mine.model_fields_set == theirs.model_fields_set
    assert mine.__pydantic_extra__ is None and theirs.__pydantic_extra__ is None
    assert mine.__pydantic_private__ is None and theirs.__pydantic_private__ is None
    assert mine == theirs and mine.model_dump_json() == theirs.model_dump_json()
    assert mine.model_dump(mode="json") == theirs.model_dump(mode="json")


def test_trusted_refuses_what_validation_would_check_and_a_misspelt_field() -> None:
    link = rec.LinkUp  # a plain record: its names are checked at run time too
    with pytest.raises(TypeError, match="each once"):
        trusted(link, link_id="bank", linkid="bank")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="needs"):
        trusted(rec.ShoeFaultRecord, code="jam")  # type: ignore[call-arg]
    # Constraints (the link contract's records) and validators are validation's to apply.
    with pytest.raises(TypeError, match="needs validating"):
        trusted(rec.LinkClaim, link_id="bank")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="needs validating"):
        trusted(table.Counters)
