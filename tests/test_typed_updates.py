"""The core's state is changed only through typed `replace` methods: a misspelt field or a
wrong type is a mypy error, not a key pydantic's `model_copy(update=...)` drops in silence."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, get_type_hints

import pytest
from pydantic import BaseModel

from tablectl.core import decks, round
from tablectl.rules import meters

# Each state model and the TypedDict its `replace` takes.
UPDATES: list[tuple[type[BaseModel], Any]] = [
    (round.TableState, round.TableStateUpdate),
    (round.Deal, round.DealUpdate),
    (round.HitEntry, round.HitEntryUpdate),
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


def test_core_state_has_no_untyped_copy() -> None:
    """`model_copy(update=...)` appears only inside the typed `replace` methods."""
    root = Path(round.__file__).parents[1]
    for package in ("core", "rules"):
        for path in (root / package).rglob("*.py"):
            for line in path.read_text().splitlines():
                if "model_copy(" in line:
                    assert line.strip() == "return self.model_copy(update=update)", path


def test_mypy_refuses_a_misspelt_field_and_a_wrong_type(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        "from tablectl.core.round import Phase, TableState\n"
        "def f(s: TableState) -> None:\n"
        "    s.replace(phase=Phase.BETTING, round_id=s.round_id + 1)\n"
        "    s.replace(pahse=Phase.BETTING)\n"
        "    s.replace(round_id='2')\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(snippet)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == ["4", "5"], done.stdout
    assert 'Unexpected keyword argument "pahse"' in errors[0]
    assert 'Argument "round_id" to "replace" of "TableState" has incompatible type' in errors[1]
