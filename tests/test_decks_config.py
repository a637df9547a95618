"""The [deck] section: limits the text sets are refused above, each error citing its section.

649a.3(c): decks "shall be changed at least every: (1) Four hours if the cards are dealt by
hand. (2) Eight hours if the cards are dealt from a manual or automated dealing shoe."
649a.8(f): the stub is counted "at least once every 5 rounds of play".
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tablectl import cli
from tablectl.config import ConfigError, load_config

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = {
    "649a": REPO / "config" / "three-card-poker.toml",
    "653a": REPO / "config" / "ultimate-texas-holdem.toml",
    "643a": REPO / "config" / "let-it-ride.toml",
}


def config_with(tmp_path: Path, chapter: str, deck: str, *, dealing: str | None = None) -> Path:
    text = EXAMPLES[chapter].read_text()
    if dealing is not None:
        text = text.replace('dealing = "automated-shoe"', f'dealing = "{dealing}"', 1)
    path = tmp_path / "table.toml"
    path.write_text(f"{text}\n[deck]\n{deck}\n")
    return path


def errors(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return caught.value.errors


@pytest.mark.parametrize("chapter", EXAMPLES)
def test_a_deck_older_than_the_text_allows_is_refused_citing_it(
    chapter: str, tmp_path: Path
) -> None:
    (line,) = errors(config_with(tmp_path, chapter, "max_age_hours = 9"))
    assert f"at least every 8 hours ({chapter}.3(c)(2))" in line and "deck.max_age_hours 9" in line
    (line,) = errors(config_with(tmp_path, chapter, "max_age_hours = 5", dealing="hand"))
    assert f"at least every 4 hours ({chapter}.3(c)(1))" in line
    rules = load_config(config_with(tmp_path, chapter, "max_age_hours = 3.5")).rules()
    assert rules.deck is not None and rules.deck.max_age_ms == 3 * 3_600_000 + 30 * 60_000


def test_the_stub_is_counted_at_least_every_five_rounds(tmp_path: Path) -> None:
    (line,) = errors(config_with(tmp_path, "649a", "stub_count_every_rounds = 6"))
    assert line.startswith("deck.stub_count_every_rounds: 6 rounds") and "649a.8(f)" in line
    rules = load_config(config_with(tmp_path, "653a", "stub_count_every_rounds = 3")).rules()
    assert rules.deck is not None and rules.deck.stub_count_every_rounds == 3


def test_the_defaults_follow_the_dealing_and_the_shuffler(tmp_path: Path) -> None:
    rules = load_config(config_with(tmp_path, "649a", "")).rules()
    assert rules.deck is not None and rules.revision == 4
    assert rules.deck.max_age_ms == 8 * 3_600_000 and rules.deck.warn_before_ms == 15 * 60_000
    assert rules.deck.idle_ms == 30 * 60_000  # 649a.5(f): the idle procedure after 30 minutes
    assert rules.deck.alternate and rules.deck.stub_count_every_rounds is None
    by_hand = load_config(config_with(tmp_path, "649a", "", dealing="hand")).rules()
    assert by_hand.deck is not None and by_hand.deck.max_age_ms == 4 * 3_600_000
    assert load_config(EXAMPLES["649a"]).rules().deck is None  # no section: no decks kept


def test_alternation_needs_two_decks_and_a_warning_before_the_limit(tmp_path: Path) -> None:
    path = config_with(tmp_path, "649a", "alternate = true")
    path.write_text(path.read_text().replace("decks = 2", "decks = 1", 1))
    assert any("649a.3(b)" in e for e in errors(path))
    lines = errors(config_with(tmp_path, "649a", "max_age_hours = 1\nwarn_before_minutes = 60"))
    assert any("deck.warn_before_minutes 60" in e for e in lines)


def test_config_check_exits_2_naming_the_field_and_the_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_with(tmp_path, "653a", "max_age_hours = 12")
    assert cli.main(["config", "check", str(path)]) == 2
    out, err = capsys.readouterr()
    assert "deck.max_age_hours 12" in out + err and "653a.3(c)(2)" in out + err


@pytest.mark.parametrize("chapter", EXAMPLES)
def test_the_deck_block_of_each_example_is_valid_uncommented(chapter: str, tmp_path: Path) -> None:
    example = EXAMPLES[chapter].read_text()
    head, _, rest = example.partition("# [deck]\n")
    block, _, tail = rest.partition("\n\n")
    path = tmp_path / "table.toml"
    path.write_text(f"{tail}\n{head}\n[deck]\n" + re.sub(r"^# (\w+ = )", r"\1", block, flags=re.M))
    rules = load_config(path).rules()
    assert rules.deck is not None and rules.deck.stub_count_every_rounds == 5
