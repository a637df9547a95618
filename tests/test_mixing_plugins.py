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


def leaks(deck, rng):
    raise ValueError("bad order: " + " ".join(map(str, deck)))


def exits(deck, rng):
    raise SystemExit(3)


def unhashable(deck, rng):
    return [[card] for card in deck]


def names(deck, rng):
    return [str(card) for card in deck]


def as_tuple(deck, rng):
    rng.shuffle(deck)
    return tuple(deck)


def one_argument(deck):
    return deck


def seats_in_the_middle(deck, seats, rng):
    return deck


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
        ("no_such_module_anywhere:f", "cannot load f: ModuleNotFoundError"),
        ("{dir}/my_shufflers.py:one_argument", "cannot be called as \\(deck, rng\\)"),
        ("{dir}/my_shufflers.py:seats_in_the_middle", "cannot be called as \\(deck, rng\\)"),
        ("random:shuffle", "cannot be called as \\(deck, rng\\)"),
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
        ("unhashable", "its shuffle returned a list of 52, not a reordering"),
        ("names", "its shuffle returned a list of 52, not a reordering"),
        ("breaks", "its shuffle raised RuntimeError "),
        ("exits", "its shuffle raised SystemExit "),
    ],
)
def test_a_shuffle_that_returns_other_cards_or_raises_is_told_by_name(
    shufflers: Path, name: str, said: str
) -> None:
    mixing = Mixing.parse(["python", f"{shufflers}:{name}"])
    with pytest.raises(MixingError, match=f"mixing python .*:{name}: {said}") as raised:
        mixing.mix(list(full_deck()), random.Random(1))
    assert "firmware" not in str(raised.value)  # the type only: a message may hold cards


def test_what_a_failing_shuffle_said_is_kept_out_of_the_message_that_is_logged(
    shufflers: Path,
) -> None:
    """Its message held every card it was given, in order: the error names its type, and
    keeps the exception as its cause for whoever debugs the shuffler."""
    mixing = Mixing.parse(["python", f"{shufflers}:leaks"])
    with pytest.raises(MixingError) as raised:
        mixing.mix(list(full_deck()), random.Random(1))
    assert "ValueError" in str(raised.value) and "2c" not in str(raised.value)
    assert "bad order: 2c" in str(raised.value.__cause__)


def test_a_tuple_is_a_reordering_too(shufflers: Path) -> None:
    out = Mixing.parse(["python", f"{shufflers}:as_tuple"]).mix(list(full_deck()), random.Random(2))
    assert isinstance(out, list) and sorted(out) == sorted(full_deck())


def test_a_file_that_imports_its_neighbour_and_uses_dataclasses_loads(tmp_path: Path) -> None:
    """A path with a space; the file beside it imported by name; a dataclass under
    `from __future__ import annotations` (it looks its module up in sys.modules)."""
    folder = tmp_path / "my shufflers"
    folder.mkdir()
    (folder / "helpers_for_my_shuffler.py").write_text("FIRST = 26\n")
    (folder / "kept.py").write_text(
        textwrap.dedent(
            """
            from __future__ import annotations
            from dataclasses import dataclass, field
            from helpers_for_my_shuffler import FIRST

            @dataclass
            class KeepsTheTop:
                calls: int = 0
                kept: list[object] = field(default_factory=list)

                def __call__(self, deck, rng):
                    self.calls += 1
                    bottom = deck[FIRST:]
                    rng.shuffle(bottom)
                    return deck[:FIRST] + bottom
            """
        )
    )
    mixing = Mixing.parse(f"python {folder}/kept.py:KeepsTheTop".split())
    deck = list(full_deck())
    assert mixing.mix(deck, random.Random(1))[:26] == deck[:26]
    assert mixing.shuffle.calls == 1  # type: ignore[union-attr]


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


async def test_the_demo_ends_saying_so_when_the_chosen_shuffle_fails(
    shufflers: Path, tmp_path: Path
) -> None:
    from tablectl.simulators.demo import BAD_FROM_ROUND, ShufflerFailed, run_demo

    with pytest.raises(ShufflerFailed, match="its shuffle raised RuntimeError"):
        await run_demo(
            load_config(REPO / "config" / "three-card-poker.toml"),
            rounds=BAD_FROM_ROUND + 1,
            keep=tmp_path / "data",
            as_json=True,
            mixing=Mixing.parse(["python", f"{shufflers}:breaks"]),
        )


def test_the_demo_refuses_a_mixing_with_the_monitor_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "off.toml"
    config.write_text(
        (REPO / "config" / "three-card-poker.toml").read_text()
        + "\n[shuffle_integrity]\nenabled = false\n"
    )
    assert load_config(config).shuffle_integrity.enabled is False
    assert cli.main(["demo", "--config", str(config), "--mixing", "unshuffled"]) == 2
    assert "turns the shuffle-integrity monitor off" in capsys.readouterr().err
