"""What a person can do about a file they may not read or write: whose it is, which group
reads it, and the command that lets them in (no "internal error" for a permission)."""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path


def _name(lookup: str, ident: int) -> str:
    try:
        if lookup == "user":
            return pwd.getpwuid(ident).pw_name
        return grp.getgrgid(ident).gr_name
    except KeyError:
        return str(ident)


def _me() -> str:
    return _name("user", os.geteuid())


def owner_of(path: Path) -> tuple[Path, str, str, int] | None:
    """The nearest of path and its parents this user can stat: (it, owner, group, mode)."""
    for candidate in (path, *path.parents):
        try:
            st = candidate.stat()
        except OSError:
            continue
        return candidate, _name("user", st.st_uid), _name("group", st.st_gid), st.st_mode
    return None


def permission_advice(path: Path | str | None, *, write: bool = False) -> str:
    """One line: what is denied, whose it is, and what to run to be let in."""
    if path is None:
        return "permission denied: run it as a member of the tablectl group, or with sudo"
    path = Path(path)
    found = owner_of(path.absolute())
    if found is None:
        return f"permission denied: {path}: run it with sudo"
    where, owner, group, mode = found
    what = "write" if write else "read"
    seen = f"{where} is {stat.filemode(mode)} {owner}:{group}"
    # A directory on the way must let the group through; the file itself, read (or write).
    needed = stat.S_IXGRP if stat.S_ISDIR(mode) and where != path.absolute() else stat.S_IRGRP
    if write and where == path.absolute():
        needed = stat.S_IWGRP
    if group == "root" or not mode & needed:
        return f"permission denied: {path} ({seen}); {what} it as {owner}: sudo -u {owner} ..."
    return (
        f"permission denied: {path} ({seen}); the {group} group may {what} it: "
        f"sudo usermod -aG {group} {_me()}, then log in again (or run it with sudo)"
    )
