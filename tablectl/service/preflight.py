"""Before `tablectl run` creates anything: is this the right user, and is the hardware there?

Started by hand as root with a table PC's config, the daemon used to create /var/lib/tablectl
and a root-owned journal, and only then find there was no GPIO chip: the service (user
tablectl) could not open its own journal afterwards. These checks come first, create
nothing, and each problem says what to do.
"""

from __future__ import annotations

import glob
import os
import pwd
import stat
import time
from pathlib import Path

from tablectl.config import TableConfig
from tablectl.util.files import owner_of, permission_advice

SERVICE_USER = "tablectl"  # systemd/tablectl.sysusers, the unit's User=


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _run_as(owner: str, config_path: Path) -> str:
    if owner == SERVICE_USER:
        return f"start the service (sudo systemctl start tablectl), or: sudo -u {owner} " + (
            f"tablectl run --config {config_path}"
        )
    return f"run it as {owner}: sudo -u {owner} tablectl run --config {config_path}"


def data_dir_problems(
    config: TableConfig,
    config_path: Path,
    *,
    euid: int | None = None,
    service_user: str = SERVICE_USER,
) -> list[str]:
    """The daemon writes its journal as the user it runs as: only the data directory's owner
    may run it, and only the service user may create the directory (where one exists)."""
    me = os.geteuid() if euid is None else euid
    data = config.storage.data_dir
    try:
        st = data.stat()
    except FileNotFoundError:
        try:
            service = pwd.getpwnam(service_user)
        except KeyError:
            return []  # no service user on this machine (development): the caller owns it
        if service.pw_uid == me:
            return []
        parent = owner_of(data)
        where = f" in {parent[0]}" if parent else ""
        return [
            f"storage.data_dir {data} does not exist{where}, and {_user(me)} would create it "
            f"and the journal as their own; the service user is {service_user}: "
            + _run_as(service_user, config_path)
        ]
    except PermissionError:
        return [f"storage.data_dir: {permission_advice(data)}"]
    if not stat.S_ISDIR(st.st_mode):
        return [f"storage.data_dir {data} is not a directory: name a directory for the journal"]
    if st.st_uid != me:
        owner = _user(st.st_uid)
        return [
            f"storage.data_dir {data} belongs to {owner}, and {_user(me)} would leave files "
            f"there that {owner} cannot write: " + _run_as(owner, config_path)
        ]
    return []


def gpio_problems(config: TableConfig) -> list[str]:
    """The GPIO chip (or the simulated table) the config names is there and usable."""
    gpio = config.gpio
    if gpio.backend == "mock":
        socket = config.simulator_socket
        if not socket.exists():
            return [
                f'gpio.backend is "mock" and there is no simulated table on {socket}: start '
                "`tablectl simulate table --config FILE` first"
            ]
        return []
    if gpio.backend == "gpiozero":
        return []  # gpiozero finds its own pins (Raspberry Pi); it says what it misses
    from tablectl.drivers.gpio.backend import GpioUnavailable
    from tablectl.drivers.gpio.gpiod_backend import GpiodChip
    from tablectl.drivers.gpio.registry import CHIPS_GLOB, chip_path

    try:
        path = chip_path(gpio.driver_settings(), sorted(glob.glob(CHIPS_GLOB)), GpiodChip)
    except GpioUnavailable as exc:
        return [f"GPIO unavailable: {exc}"]
    if not os.path.exists(path):
        return [f"gpio.chip {path} does not exist (gpiodetect lists the chips)"]
    if not os.access(path, os.R_OK | os.W_OK):
        return [f"gpio: {permission_advice(path, write=True)} (systemd/99-tablectl.rules)"]
    return []


# A simulated table started beside the daemon (the README's try-out starts both at once)
# may take a moment to open its socket.
SIMULATED_TABLE_WAIT_S = 5.0


def wait_for_simulated_table(
    config: TableConfig, timeout_s: float = SIMULATED_TABLE_WAIT_S
) -> None:
    """With gpio.backend "mock", until the simulated table's socket is there, or timeout_s."""
    if config.gpio.backend != "mock":
        return
    deadline = time.monotonic() + timeout_s
    while not config.simulator_socket.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def problems(config: TableConfig, config_path: Path) -> list[str]:
    """Every reason not to start, each with what to do; [] when the daemon may start."""
    return [*data_dir_problems(config, config_path), *gpio_problems(config)]
