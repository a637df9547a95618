"""One process per table in each role: an exclusive lock held for the process's life.

`tablectl run` and `tablectl simulate table` each take theirs before anything with side
effects (the journal, a socket, the broker, a serial link), and a second instance is refused
with the PID of the first. The lock is flock(2) on a file in the table's data directory: the
kernel drops it when the holder ends, however it ends (SIGKILL, a power cut), so a lock file
left behind never blocks a new start. The file is never deleted: a process that deleted it
would let the next two lock two different files.

A socket is removed on exit only by the process that created it (`OwnedPath`): a process
that finds the path replaced by someone else's leaves it alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# The holder writes its PID just after it takes the lock; one refused in between waits this
# long at most for it to appear.
PID_WAIT_S = 1.0


class InstanceLocked(Exception):
    """Another process holds the lock; the message names it (its PID, when known)."""

    def __init__(self, path: Path, what: str, pid: int | None) -> None:
        holder = f"PID {pid}" if pid is not None else "another process (its PID is not recorded)"
        super().__init__(f"another {what} is running for this table: {holder} holds {path}")
        self.path = path
        self.pid = pid


@contextlib.contextmanager
def held(path: Path, what: str) -> Iterator[None]:
    """Hold the lock at `path` for the `with` block; InstanceLocked if another process has it.

    what: the role, as the refusal names it ("tablectl run").
    """
    path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o640)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InstanceLocked(path, what, _holder(fd)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock, as the end of the process would


def _holder(fd: int) -> int | None:
    """The PID the holder wrote; it may be a moment behind its lock (then the file is empty,
    or names a process that has ended)."""
    deadline = time.monotonic() + PID_WAIT_S
    while True:
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
        if text.isdigit() and _alive(int(text)):
            return int(text)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process (the daemon's, to a technician)
    return True


@dataclass(frozen=True, slots=True)
class OwnedPath:
    """A path this process created (a socket, a link), told apart from a later one by its
    inode and change time (an inode number may be reused): `remove()` unlinks it only while
    it is still the one created. Take it once the path is as it stays (after a chmod)."""

    path: Path
    identity: tuple[int, int, int]

    @classmethod
    def created(cls, path: Path) -> OwnedPath:
        return cls(path, _identity(path))

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            if _identity(self.path) == self.identity:
                self.path.unlink()


def _identity(path: Path) -> tuple[int, int, int]:
    st = path.lstat()
    return st.st_dev, st.st_ino, st.st_ctime_ns
