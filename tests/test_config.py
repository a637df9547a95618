"""Config validation: every error names the field and, for regulatory limits, the rule."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tablectl import cli
from tablectl.config import ConfigError, TableConfig, load_config
from tablectl.core.games import GAME_NAMES

from .conftest import EXAMPLE_CONFIG, REPO

GAME_CONFIGS = [REPO / "config" / f"{g}.toml" for g in GAME_NAMES]


def write_variant(
    tmp_path: Path, *replacements: tuple[str, str], base: Path = EXAMPLE_CONFIG
) -> Path:
    text = base.read_text()
    for pattern, new in replacements:
        text, n = re.subn(pattern, new, text, count=1, flags=re.MULTILINE)
        assert n == 1, f"example config has no line matching {pattern!r}"
    path = tmp_path / "table.toml"
    path.write_text(text)
    return path


def errors_of(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return info.value.errors


def test_example_config_is_valid() -> None:
    cfg = load_config(EXAMPLE_CONFIG)
    game = cfg.game.table_game()
    assert game.wager_cents == 100
    assert game.meter is not None
    assert game.meter.rate_bp == 1450  # basis points, exact
    assert game.meter.reset_cents == 100_000


@pytest.mark.parametrize("path", GAME_CONFIGS, ids=GAME_NAMES)
def test_every_game_has_an_example_config_that_round_trips(path: Path) -> None:
    cfg = load_config(path)
    assert cfg.game.name == path.stem
    # The rules are journaled with every power-up and read back by replay: exactly the same.
    rules = cfg.rules()
    assert type(rules).model_validate(rules.model_dump(mode="json")) == rules
    assert cli.main(["config", "check", str(path)]) == 0


@pytest.mark.parametrize(
    ("replacements", "expected"),
    [
        (
            [(r"^rate_of_progression_percent = .*$", 'rate_of_progression_percent = "13.99"')],
            "game.progressive: Value error, rate_of_progression_percent 13.99% is below the 14% "
            "minimum for paytable A (649a.12(e)(3))",
        ),
        (
            [(r"^paytable = .*$", 'paytable = "B"')],
            "game.progressive: Value error, rate_of_progression_percent 14.5% is below the 20% "
            "minimum for paytable B (649a.12(e)(3))",
        ),
        (
            [(r"^reset_amount = .*$", 'reset_amount = "999.99"')],
            "game.progressive.reset_amount: $999.99 is below the $1,000.00 minimum initial and "
            "reset amount of 649a.12(e)(3)",
        ),
        (
            [(r"^seats = 6", "seats = 8")],
            "table.seats: Input should be less than or equal to 7",
        ),
        (
            [(r"^wager = .*$", 'wager = "2.00"')],
            "game.progressive.wager: the Progressive Payout Wager must be $1 or $5: 649a.12(e)(5) "
            "defines Envy Bonuses for those two amounts only",
        ),
        (
            [(r"^initial_amount = .*$", "initial_amount = 1000.5")],
            'game.progressive.initial_amount: write money as a quoted decimal such as "1000.00" '
            "or whole dollars, not 1000.5",
        ),
        (
            [(r"^baudrate = 115200", 'baudrate = 115200\nparity = "N"')],
            "shuffler.parity: unknown key (not part of the configuration schema)",
        ),
    ],
)
def test_bad_config_names_field_and_rule(
    tmp_path: Path, replacements: list[tuple[str, str]], expected: str
) -> None:
    errors = errors_of(write_variant(tmp_path, *replacements))
    assert [e.replace("Value error, ", "") for e in errors] == [
        expected.replace("Value error, ", "")
    ]


def test_every_error_is_reported_at_once(tmp_path: Path) -> None:
    path = write_variant(
        tmp_path,
        (r"^seats = 6", "seats = 0"),
        (r"^reset_amount = .*$", 'reset_amount = "10"'),
        (r"^lockout_pin = 16", "lockout_pin = 16\nbounce = 3"),
    )
    errors = errors_of(path)
    assert len(errors) == 3
    assert {e.split(":")[0] for e in errors} == {
        "table.seats",
        "game.progressive.reset_amount",
        "gpio.bounce",
    }


def test_one_sensor_per_seat(tmp_path: Path) -> None:
    path = write_variant(tmp_path, (r"^seats = 6", "seats = 5"))
    sensors, lights = errors_of(path)  # both, in one pass
    assert "649a.2(c)(1)" in sensors and "gpio.seat_sensor_pins lists 6 pins for 5 seats" in sensors
    assert "gpio.seat_light_pins lists 6 pins for 5 seats" in lights


def test_a_line_used_twice_names_both_fields(tmp_path: Path) -> None:
    path = write_variant(tmp_path, (r"^lockout_pin = \d+", "lockout_pin = 13"))
    assert errors_of(path) == [
        "gpio: line 13 is used by gpio.seat_sensor_pins[2] and gpio.lockout_pin: one each"
    ]


def test_every_error_is_reported_in_one_pass(tmp_path: Path) -> None:
    """Section errors and the checks across sections together: no fix-one-see-the-next."""
    path = write_variant(
        tmp_path,
        (r"^seats = 6", "seats = 5"),
        (r"^lockout_pin = \d+", "lockout_pin = 13"),
        (r"^\[mqtt\]", "[mqtt]\nbogus = 1"),
        (r"^port = 1883", "port = 0"),
    )
    errors = errors_of(path)
    assert "mqtt.bogus: unknown key (not part of the configuration schema)" in errors
    assert any(e.startswith("mqtt.port: ") for e in errors)
    assert any(e.startswith("gpio.seat_sensor_pins lists 6 pins for 5 seats") for e in errors)
    assert any(e.startswith("gpio.seat_light_pins lists 6 pins for 5 seats") for e in errors)
    assert "gpio: line 13 is used by gpio.seat_sensor_pins[2] and gpio.lockout_pin: one each" in (
        errors
    )
    assert len(errors) == 5, errors


def test_config_check_exits_2_listing_the_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_variant(tmp_path, (r"^paytable = .*$", 'paytable = "C"'))
    assert cli.main(["config", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "game.progressive.paytable: Input should be 'A' or 'B'" in err
    assert cli.main(["config", "check", str(EXAMPLE_CONFIG)]) == 0


def test_run_with_bad_config_starts_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    path = write_variant(
        tmp_path,
        (r"^rate_of_progression_percent = .*$", 'rate_of_progression_percent = "10"'),
        (r"^data_dir = .*$", f'data_dir = "{data_dir}"'),
    )
    exe = Path(sys.executable).with_name("tablectl")
    proc = subprocess.run(
        [exe, "run", "--config", str(path)], capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.returncode == 2
    assert "649a.12(e)(3)" in proc.stderr
    assert not data_dir.exists()  # no database, no socket: nothing started


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    assert errors_of(tmp_path / "missing.toml")[0].startswith("cannot read")
    bad = tmp_path / "bad.toml"
    bad.write_text("[table\n")
    assert errors_of(bad)[0].startswith("not valid TOML")


@pytest.mark.parametrize(
    ("game", "replacements", "expected"),
    [
        (
            "ultimate-texas-holdem",
            [(r"^reset_amount = .*$", 'reset_amount = "9999.99"')],
            "game.progressive.reset_amount: $9,999.99 is below the $10,000.00 minimum initial "
            "and reset amount of 653a.12(d)(3)",
        ),
        (
            "ultimate-texas-holdem",
            [
                (r"^seats = 6", "seats = 7"),
                (r"^seat_sensor_pins = .*$", "seat_sensor_pins = [5, 6, 13, 19, 26, 21, 20]"),
                (r"^seat_light_pins = .*$", "seat_light_pins = [17, 27, 22, 23, 24, 25, 12]"),
            ],
            "table.seats 7: a table of ultimate-texas-holdem has at most 6 betting positions "
            "(653a.2(a))",
        ),
        (
            "ultimate-texas-holdem",
            [(r'^text = "2019"', 'text = "2020"')],
            "game.text: Input should be '2012' or '2019'",
        ),
        (
            "let-it-ride",
            [(r'^wager = "1.00"', 'wager = "1.50"')],
            "game.bonus.wager: the Let It Ride Bonus Wager is whole dollars: the amounts of "
            "643a.12(b) are for a $1 wager and paid in proportion",
        ),
        (
            "ultimate-texas-holdem",
            [(r"^minimum_wager = .*$", 'minimum_wager = "100.00"')],
            "game: payout_limit $50,000.00 is below the $55,500.00 minimum of 653a.12(e): at "
            "least $50,000.00 or the most one patron can win per round when betting the minimum "
            "wager (Ante, Blind and Trips at the minimum, the Play at four times the Ante), "
            "whichever is greater",
        ),
        (
            "let-it-ride",
            [(r"^minimum_wager = .*$", "")],
            "game: payout_limit needs the table's minimum_wager: 643a.12(d) sets its minimum "
            "from the most one patron can win per round when betting the minimum wager",
        ),
        (
            "let-it-ride",
            [(r'^name = "let-it-ride"', 'name = "baccarat"')],
            "game: game.name must be one of three-card-poker, ultimate-texas-holdem, let-it-ride",
        ),
    ],
)
def test_each_game_checks_its_own_rules(
    tmp_path: Path, game: str, replacements: list[tuple[str, str]], expected: str
) -> None:
    base = REPO / "config" / f"{game}.toml"
    assert errors_of(write_variant(tmp_path, *replacements, base=base)) == [expected]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("latin-1", "not UTF-8 text"),
        ("utf-16", "not UTF-8 text"),
        ("nested", "storage.deep: nested too deeply"),
        ('initial_amount = "Infinity"', "is not money a table can use"),
        ('initial_amount = "1e999999"', "is not money a table can use"),
        ('initial_amount = "1e30"', "is not money a table can use"),
        ('initial_amount = "-1000"', "outside $0 to $100,000,000"),
        ("lockout_pin = -16", "gpio.lockout_pin: line offset -16 is outside 0 to 1023"),
    ],
)
def test_malformed_values_are_exit_2_naming_the_field(
    tmp_path: Path, content: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = EXAMPLE_CONFIG.read_text()
    path = tmp_path / "table.toml"
    if content == "latin-1":
        path.write_bytes(
            text.replace("tcp-07", "tcp-07").encode() + "# caf\xe9\n".encode("latin-1")
        )
    elif content == "utf-16":
        path.write_bytes(text.encode("utf-16"))
    elif content == "nested":
        path.write_text(text + "deep = " + "[" * 5000 + "]" * 5000 + "\n")
    else:
        key = content.split(" = ")[0]
        text, n = re.subn(rf"^{key} = .*$", content, text, count=1, flags=re.MULTILINE)
        assert n == 1
        path.write_text(text)
    assert cli.main(["config", "check", str(path)]) == 2
    assert expected in capsys.readouterr().err


@pytest.mark.parametrize(
    ("shoe", "expected"),
    [
        ('port = "usb:zz:6150"', "shoe.port: 'usb:zz:6150': write usb:VVVV:PPPP"),
        ('port = "socket://nohost"', "shoe.port: 'socket://nohost': write socket://HOST:PORT"),
        ('port = "usb:1d50:6150"\ndriver = "acme"', "shoe.driver: unknown driver 'acme'"),
        ('port = "usb:1d50:6150"\nbaud = 9600', "shoe.baud: unknown key"),
    ],
)
def test_bad_shoe_section_names_the_field(tmp_path: Path, shoe: str, expected: str) -> None:
    path = tmp_path / "table.toml"
    path.write_text(EXAMPLE_CONFIG.read_text() + f"\n[shoe]\n{shoe}\n")
    assert any(e.startswith(expected) for e in errors_of(path)), errors_of(path)


def test_a_shoe_section_makes_the_core_form_hands_from_the_shoe(tmp_path: Path) -> None:
    path = tmp_path / "table.toml"
    path.write_text(EXAMPLE_CONFIG.read_text() + '\n[shoe]\nport = "usb:1d50:6150:SHOE-0001"\n')
    cfg = load_config(path)
    assert cfg.shoe is not None and cfg.shoe.driver == "reference" and cfg.rules().shoe
    assert not load_config(EXAMPLE_CONFIG).rules().shoe


def test_the_access_block_of_the_example_is_valid_uncommented(tmp_path: Path) -> None:
    example = EXAMPLE_CONFIG.read_text()
    head, _, block = example.partition("# [access]")
    block = re.sub(r"^# (\w+ = )", r"\1", block, flags=re.M)
    text = head + "[access]" + block
    path = tmp_path / "table.toml"
    path.write_text(text)
    access = load_config(path).access
    assert access.dealer == ("tablectl-dealer",) and access.max_connections == 64
    path.write_text(text.replace('dealer = ["tablectl-dealer"]', 'dealer = ["Dealers!"]'))
    assert any(
        e.startswith("access.dealer[0]: String should match pattern") for e in errors_of(path)
    )


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (
            ["chip_present_ms = 50", "chip_bounce_ms = 50"],
            "gpio: chip_bounce_ms (50) must be shorter than chip_present_ms (50): a chip "
            "that is away longer than it takes to rest has left",
        ),
        (
            ["chip_bounce_ms = -1"],
            "gpio.chip_bounce_ms: Input should be greater than or equal to 0",
        ),
        (
            ["chip_bounce_ms = 101"],
            "gpio.chip_bounce_ms: Input should be less than or equal to 100",
        ),
        (
            ["lockout_hold_max_ms = 400"],
            "gpio.lockout_hold_max_ms: Input should be greater than or equal to 500",
        ),
        (
            ["lockout_hold_max_ms = 900", "lockout_debounce_ms = 900"],
            "gpio: lockout_hold_max_ms (900) must be longer than lockout_debounce_ms (900)",
        ),
        (
            ["sensor_stuck_rounds = 0"],
            "gpio.sensor_stuck_rounds: Input should be greater than or equal to 1",
        ),
        (
            ["sensor_stuck_rounds = 11"],
            "gpio.sensor_stuck_rounds: Input should be less than or equal to 10",
        ),
    ],
)
def test_the_lockout_and_stuck_input_times_are_bounded(
    tmp_path: Path, lines: list[str], expected: str
) -> None:
    replacements = [(rf"^{line.split(' ')[0]} = .*$", line) for line in lines]
    assert errors_of(write_variant(tmp_path, *replacements)) == [expected]


def test_the_table_rules_carry_the_sensor_rules(example_config: TableConfig) -> None:
    rules = example_config.model_copy(
        update={"gpio": example_config.gpio.model_copy(update={"sensor_stuck_rounds": 3})}
    ).rules()
    assert rules.sensors is not None and rules.sensors.stuck_rounds == 3


# --- issue 27 item 11: values that were accepted, or crashed, and are config errors ---------


def deep_header(prefix: str, depth: int) -> str:
    """A dotted table header `depth` tables deep under prefix ([gpio.a.a.a...])."""
    return "\n[" + ".".join([*filter(None, [prefix]), *["a"] * depth]) + "]\nx = 1\n"


@pytest.mark.parametrize(
    ("prefix", "field"),
    [("", "a"), ("gpio", "gpio.a"), ("game.progressive", "game.progressive.a"), ("shoe", "shoe.a")],
)
@pytest.mark.parametrize("depth", [500, 5000])
def test_a_table_header_nested_hundreds_deep_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], prefix: str, field: str, depth: int
) -> None:
    """It was an internal error (exit 70): the pruning copy recursed inside the handler of
    the validation error, past the RecursionError handler beside it."""
    path = tmp_path / "table.toml"
    path.write_text(EXAMPLE_CONFIG.read_text() + deep_header(prefix, depth))
    assert cli.main(["config", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"  {field}: unknown key (not part of the configuration schema)" in err.splitlines()
    assert "internal error" not in err


def test_run_refuses_a_deep_header_naming_it_and_starts_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    path = write_variant(tmp_path, (r"^data_dir = .*$", f'data_dir = "{data_dir}"'))
    path.write_text(path.read_text() + deep_header("mqtt", 500))
    exe = Path(sys.executable).with_name("tablectl")
    proc = subprocess.run(
        [exe, "run", "--config", str(path)], capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert "mqtt.a: unknown key" in proc.stderr and "internal error" not in proc.stderr
    assert not data_dir.exists()


@pytest.mark.parametrize(
    ("replacements", "expected"),
    [
        (
            [(r"^data_dir = .*$", 'data_dir = ""')],
            "storage.data_dir: is empty: give the directory's absolute path, e.g. "
            "/var/lib/tablectl",
        ),
        (
            [(r"^data_dir = .*$", 'data_dir = "var/lib/tablectl"')],
            "storage.data_dir: 'var/lib/tablectl' is relative: give the directory's absolute "
            "path, e.g. /var/lib/tablectl",
        ),
        (
            [(r"^data_dir = .*$", 'data_dir = "."')],
            "storage.data_dir: '.' is relative: give the directory's absolute path, e.g. "
            "/var/lib/tablectl",
        ),
        (
            [(r"^host = .*$", 'host = "broker example.net"')],
            "mqtt.host: 'broker example.net' has whitespace in it: no host name does",
        ),
        (
            [(r"^host = .*$", 'host = " broker.example.net"')],
            "mqtt.host: ' broker.example.net' has whitespace in it: no host name does",
        ),
        (
            [(r"^host = .*$", 'host = "broker\\texample.net"')],  # a tab, as TOML allows
            "mqtt.host: 'broker\\texample.net' has whitespace in it: no host name does",
        ),
        (
            [(r"^host = .*$", 'host = "broker/1"')],
            "mqtt.host: 'broker/1' is not a host name: labels of 1 to 63 letters, digits and "
            "hyphens between dots, or an IP address",
        ),
        (
            [
                (r"^# \[progressive\]", "[progressive]"),
                (r"^# link = ", "link = "),
                (r'^# backend_id = "link"', 'backend_id = "pgs"'),
            ],
            "progressive.backend_id 'pgs' is also in mqtt.backends: the progressive's "
            "controllers acknowledge under an id of their own (it joins mqtt.backends by "
            "itself), or another backend's acks would release rows they never applied; give "
            "it another id, or take it out of mqtt.backends",
        ),
        (
            [
                (r"^backends = .*$", 'backends = ["pgs", "link"]'),
                (r"^# \[progressive\]", "[progressive]"),
                (r"^# link = ", "link = "),
            ],
            "progressive.backend_id 'link' is also in mqtt.backends: the progressive's "
            "controllers acknowledge under an id of their own (it joins mqtt.backends by "
            "itself), or another backend's acks would release rows they never applied; give "
            "it another id, or take it out of mqtt.backends",
        ),
    ],
)
def test_a_value_that_was_accepted_is_an_error_naming_its_field(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    replacements: list[tuple[str, str]],
    expected: str,
) -> None:
    path = write_variant(tmp_path, *replacements)
    assert errors_of(path) == [expected]
    assert cli.main(["config", "check", str(path)]) == 2
    assert f"  {expected}" in capsys.readouterr().err.splitlines()


def test_a_backend_id_shared_is_listed_beside_the_other_errors(tmp_path: Path) -> None:
    path = write_variant(
        tmp_path,
        (r"^port = 1883", "port = 0"),
        (r"^# \[progressive\]", "[progressive]"),
        (r"^# link = ", "link = "),
        (r'^# backend_id = "link"', 'backend_id = "pgs"'),
    )
    errors = errors_of(path)
    assert errors[0] == "mqtt.port: Input should be greater than or equal to 1"
    assert errors[1].startswith("progressive.backend_id 'pgs' is also in mqtt.backends")
    assert len(errors) == 2


@pytest.mark.parametrize(
    "host",
    ["broker.example.net", "mqtt_broker", "localhost", "b\u00fccher.example", "::1", "10.0.0.7"],
)
def test_host_names_and_addresses_getaddrinfo_takes_are_accepted(tmp_path: Path, host: str) -> None:
    config = load_config(write_variant(tmp_path, (r"^host = .*$", f'host = "{host}"')))
    assert config.mqtt.host == host


def test_the_link_controllers_host_is_checked_the_same_way(tmp_path: Path) -> None:
    from tablectl.link.config import load_link_config

    text = (REPO / "config" / "link.toml").read_text()
    text, n = re.subn(r"^host = .*$", 'host = "floor broker"', text, count=1, flags=re.MULTILINE)
    assert n == 1
    path = tmp_path / "link.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_link_config(path)
    assert info.value.errors == [
        "mqtt.host: 'floor broker' has whitespace in it: no host name does"
    ]
