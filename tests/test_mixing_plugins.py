"""Your own bad shuffler (issue 30: "independent bad shufflers, written outside the repository
... are played against the monitor through a simulated table"): a function or class in a file
of yours, plugged into the simulated shuffler as `python FILE.py:NAME` (or MODULE:NAME), is
played through the bench's table and the daemon's, and one that misbehaves is told by name.
"""

from __future__ import annotations

import random
import textwrap
from pathlib import Path

import pytest
from tablectl.simulators.shuffle_play import play
from tablectl.simulators.shuffler import Mixing, MixingError, riffle

from tablectl import cli
from tablectl.config import load_config
from tablectl.core.games.base import TableGame
from tablectl.core.table import Phase
from tablectl.rules.cards import full_deck

from .conftest import REPO, SimulatedTable

SHUFFLERS = '''
def top_half_kept(deck, rng):
    """A worn machine: only the bottom half is mixed, the top half comes out as it went in."""
    bottom = deck[26:]
    rng.shuffle(bottom)
    return deck[:26] + bottom


class SteerToSeat:
    """A cheat with a confederate: fair, then the ace of spades swapped into seat 3's hand."""

    def __init__(self):
        self.shuffles = 0
        self.seats_seen = 0

    def __call__(self, deck, rng, *, seats):
        self.shuffles += 1
        out = list(deck)
        rng.shuffle(out)
        if 3 in seats:
            self.seats_seen += 1
            ace = next(i for i, c in enumerate(out) if str(c) == "As")
            to = seats[3][rng.randrange(len(seats[3]))]
            out[ace], out[to] = out[to], out[ace]
        return out


def drops_a_card(deck, rng):
    return deck[1:]


def breaks(deck, rng):
    raise RuntimeError("firmware fault 0x3f")

NOT_A_SHUFFLE = 42
'''


@pytest.fixture
def shufflers(tmp_path: Path) -> Path:
    path = tmp_path / "elsewhere" / "my_shufflers.py"
    path.parent.mkdir()
    path.write_text(textwrap.dedent(SHUFFLERS))
    return path


def tcp() -> TableGame:
    return load_config(REPO / "config" / "three-card-poker.toml").game.table_game()


def uses_until_alarm(mixing: Mixing, seed: int, give_up: int) -> int:
    for played in play(tcp(), mixing, random.Random(seed), warm_up=30):
        if played.report.alarms:
            return played.use
        assert played.use < give_up, f"{mixing} not caught within {give_up} uses"
    raise AssertionError("unreachable: play() goes on for ever")


def test_a_shuffler_from_a_file_outside_the_repository_is_played_and_caught(
    shufflers: Path,
) -> None:
    mixing = Mixing.parse(["python", f"{shufflers}:top_half_kept"])
    assert str(mixing) == f"python {shufflers}:top_half_kept"
    deck = list(full_deck())
    out = mixing.mix(deck, random.Random(1))
    assert out[:26] == deck[:26] and sorted(out) == sorted(deck) and out != deck
    # The bench's figure for this one: median 1 use, 95th percentile 2 (TCP).
    assert uses_until_alarm(mixing, seed=5, give_up=10) <= 10


def test_a_class_keeps_its_state_and_is_given_the_seats_when_it_asks(shufflers: Path) -> None:
    mixing = Mixing.parse(["python", f"{shufflers}:SteerToSeat"])
    uses = uses_until_alarm(mixing, seed=3, give_up=60)
    cheat = mixing.shuffle
    # One instance for the whole run (its count went on over both decks' uses), handed each
    # deal's seats: seat 3 plays in some rounds, not all.
    assert cheat is not None and cheat.shuffles >= 2 * uses - 1  # type: ignore[attr-defined]
    assert 0 < cheat.seats_seen < cheat.shuffles  # type: ignore[attr-defined]


def test_a_shuffler_from_an_installed_module_is_named_by_module() -> None:
    mixing = Mixing.parse(["python", "tablectl.simulators.shuffler:riffle"])
    deck = list(full_deck())
    assert mixing.mix(deck, random.Random(9)) == riffle(deck, random.Random(9))


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("nowhere.py:f", "no such file"),
        ("{dir}/my_shufflers.py:nothing_here", "has no 'nothing_here'"),
        ("{dir}/my_shufflers.py:NOT_A_SHUFFLE", "NOT_A_SHUFFLE is not callable"),
        ("{dir}/my_shufflers.py", "expected MODULE:NAME or FILE.py:NAME"),
        ("no_such_module_anywhere:f", "cannot load no_such_module_anywhere"),
    ],
)
def test_a_shuffler_that_cannot_be_loaded_is_refused_saying_why(
    shufflers: Path, target: str, said: str
) -> None:
    with pytest.raises(MixingError, match=said):
        Mixing.parse(["python", target.format(dir=shufflers.parent)])


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("drops_a_card", "its shuffle returned a list of 51, not a reordering of the 52 cards"),
        ("breaks", "its shuffle raised RuntimeError\\('firmware fault 0x3f'\\)"),
    ],
)
def test_a_shuffle_that_returns_other_cards_or_raises_is_told_by_name(
    shufflers: Path, name: str, said: str
) -> None:
    mixing = Mixing.parse(["python", f"{shufflers}:{name}"])
    with pytest.raises(MixingError, match=f"mixing python .*:{name}: {said}"):
        mixing.mix(list(full_deck()), random.Random(1))


def test_simulate_table_refuses_a_shuffler_it_cannot_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = REPO / "config" / "simulated-table.toml"
    argv = ["simulate", "table", "--config", str(config), "--mixing", "python gone.py:f"]
    assert cli.main(argv) == 2
    assert "no such file" in capsys.readouterr().err


async def test_a_shuffle_that_fails_stops_the_shuffler_and_the_table_waits(
    table: SimulatedTable, shufflers: Path
) -> None:
    """The daemon sees a stopped shuffle (649a.13(e): reshuffle before the deck plays), not
    a shuffler that never answers; once the shuffle works, a reshuffle opens the table."""
    await table.wait_phase(Phase.BETTING)
    table.sim.mixing = Mixing.parse(["python", f"{shufflers}:breaks"])
    await table.lock()  # the other deck's shuffle was asked for at round open
    await table.daemon.wait_until(lambda s: s.shuffler_fault == "stopped", 5)
    assert (await table.dealer(cmd="settle", hands={}))["ok"]
    await table.until_shuffler_has_nothing_left()
    assert table.state.phase is Phase.CLOSED
    table.sim.mixing = Mixing.parse(["python", f"{shufflers}:top_half_kept"])
    assert (await table.dealer(cmd="reshuffle"))["ok"]
    await table.wait_phase(Phase.BETTING)
