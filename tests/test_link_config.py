"""The link controller's config: every error names its field, and the game's rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tablectl.cli import main
from tablectl.config import ConfigError
from tablectl.link.config import expand_tables, load_link_config

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "config" / "link.toml"


def variant(tmp_path: Path, old: str, new: str) -> Path:
    text = EXAMPLE.read_text()
    assert old in text, old
    path = tmp_path / "link.toml"
    path.write_text(text.replace(old, new, 1))
    return path


def errors(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_link_config(path)
    return caught.value.errors


def test_the_example_config_loads() -> None:
    config = load_link_config(EXAMPLE)
    (definition,) = config.definitions()
    assert definition.link_id == "tcp-bank-1"
    assert definition.tables[0] == "pa-demo-casino/tcp-01" and len(definition.tables) == 8
    (level,) = definition.levels
    assert (level.rate_bp, level.contribution_rate_bp, level.initial_cents) == (1450, 1450, 100000)
    assert definition.backend_id == "link" and definition.link_timeout_ms == 5000


@pytest.mark.parametrize(
    ("old", "new", "field", "rule"),
    [
        (
            'rate_of_progression_percent = "14.5"',
            'rate_of_progression_percent = "13"',
            "rate_of_progression_percent",
            "649a.12(e)(3)",
        ),
        ('paytable = "A"', 'paytable = "B"', "rate_of_progression_percent", "20% minimum"),
        (
            'initial_amount = "1000.00"',
            'initial_amount = "999.99"',
            "initial_amount",
            "649a.12(e)(3)",
        ),
        ('reset_amount = "1000.00"', 'reset_amount = "500"', "reset_amount", "649a.12(e)(3)"),
        ('wager = "5.00"', 'wager = "2.00"', "wager", "649a.12(e)(5)"),
        (
            'game = "three-card-poker" ',
            'game = "ultimate-texas-holdem" ',
            "paytable",
            "653a.12(d)",
        ),
        ('hit_policy = "ordered"', 'hit_policy = "first-come"', "link[0].hit_policy", "ordered"),
        ("link_timeout_s = 5", "link_timeout_s = 0.5", "link[0].link_timeout_s", "1"),
        ('"pa-demo-casino/tcp-{01..08}"', '"tcp-01"', "link[0].tables", "site/table"),
        (
            '"pa-demo-casino/tcp-{01..08}"',
            '"pa-demo-casino/tcp-{01..08}", "pa-demo-casino/tcp-03"',
            "link[0].tables",
            "listed twice",
        ),
        ('conninfo = "host=', 'conninfo = "host', "database.conninfo", "connection string"),
        ('listen = "127.0.0.1:8088"', 'listen = "8088"', "sign.listen", "HOST:PORT"),
        ("batch_max_rows = 2000", "batch_max_rows = 0", "controller.batch_max_rows", "1"),
        ("[mqtt]", "[mqtt]\ncolour = 1", "mqtt.colour", "unknown key"),
    ],
)
def test_a_bad_value_names_its_field_and_rule(
    tmp_path: Path, old: str, new: str, field: str, rule: str
) -> None:
    found = errors(variant(tmp_path, old, new))
    assert any(field in e and rule in e for e in found), found


def test_ultimate_texas_holdem_needs_ten_thousand_dollars(tmp_path: Path) -> None:
    path = variant(tmp_path, 'paytable = "A"', "")
    path.write_text(path.read_text().replace('"three-card-poker" ', '"ultimate-texas-holdem" '))
    found = errors(path)
    assert any("initial_amount" in e and "$10,000.00" in e and "653a.12(d)(3)" in e for e in found)


def test_a_table_is_on_one_link_only(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    link = text[text.index("[[link]]") :]
    path = tmp_path / "link.toml"
    path.write_text(text + "\n" + link.replace('"tcp-bank-1"', '"tcp-bank-2"'))
    assert any("tcp-01 is on links tcp-bank-1 and tcp-bank-2" in e for e in errors(path))


def test_table_ranges_expand_as_written() -> None:
    assert expand_tables(["s/t{8..11}", "s/x{09..10}y"]) == [
        "s/t8", "s/t9", "s/t10", "s/t11", "s/x09y", "s/x10y",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="in order"):
        expand_tables(["s/t{5..1}"])


def test_the_cli_says_which_field_and_exits_2_before_touching_a_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = variant(tmp_path, 'initial_amount = "1000.00"', 'initial_amount = "10.00"')
    for verb in (["run"], ["migrate"], ["verify"], ["apply"], ["open", "tcp-bank-1"]):
        assert main(["link", *verb, "--config", str(path)]) == 2
        err = capsys.readouterr().err
        assert "initial_amount" in err and "649a.12(e)(3)" in err, err
    assert main(["link", "verify", "--config", str(path), "--json"]) == 2
    body = json.loads(capsys.readouterr().out)
    assert body["ok"] is False and any("initial_amount" in e for e in body["errors"])
