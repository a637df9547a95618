"""Who is on the other end of the control socket, and which roles their groups give them.

The kernel tells us (SO_PEERCRED: pid, uid, gid; SO_PEERGROUPS: the supplementary groups the
client process had when it connected), so nobody can claim a role by what they send. The
`[access]` section of the config names the Unix groups that hold each role.
"""

from __future__ import annotations

import grp
import os
import pwd
import socket
import struct
from dataclasses import dataclass

import structlog

from tablectl.config import AccessSection
from tablectl.control.protocol import EVERY_ROLE, Role

log = structlog.get_logger(__name__)

# Linux's SO_PEERGROUPS (4.13+); Python's socket module does not name it.
SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)
_UCRED = struct.Struct("3i")
_MAX_GROUPS = 65536


@dataclass(frozen=True, slots=True)
class Peer:
    pid: int
    uid: int
    gid: int
    groups: frozenset[int]

    @property
    def user(self) -> str:
        try:
            return pwd.getpwuid(self.uid).pw_name
        except KeyError:
            return f"uid {self.uid}"


UNKNOWN_PEER = Peer(pid=0, uid=-1, gid=-1, groups=frozenset())


def peer_of(sock: socket.socket | None) -> Peer:
    """The credentials of a Unix socket's client; UNKNOWN_PEER (no roles) if unreadable."""
    if sock is None:
        return UNKNOWN_PEER
    try:
        pid, uid, gid = _UCRED.unpack(
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
        )
        groups = _peer_groups(sock)
    except OSError:
        return UNKNOWN_PEER
    return Peer(pid=pid, uid=uid, gid=gid, groups=frozenset({gid, *groups}))


def _peer_groups(sock: socket.socket) -> tuple[int, ...]:
    size = 64 * 4
    while True:
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, size)
        except OSError as exc:
            # ERANGE: the buffer was too small; the kernel says so instead of truncating.
            if exc.errno == 34 and size < _MAX_GROUPS * 4:
                size *= 4
                continue
            raise
        return struct.unpack(f"{len(raw) // 4}I", raw)


class AccessPolicy:
    """Roles by group, resolved once at start-up; root and the daemon's user hold them all."""

    def __init__(self, config: AccessSection, *, own_uid: int | None = None) -> None:
        self._own_uid = os.geteuid() if own_uid is None else own_uid
        self.groups: dict[Role, frozenset[int]] = {}
        missing = []
        for role in Role:
            gids = set()
            for name in groups_for(config, role):
                try:
                    gids.add(grp.getgrnam(name).gr_gid)
                except KeyError:
                    missing.append(name)
            self.groups[role] = frozenset(gids)
        if missing:
            # Loud when the config names them; the built-in names are only there once the
            # package is installed (sysusers.d), so a development machine just says so.
            say = log.warning if config.model_fields_set else log.info
            say(
                "access groups do not exist; only root and this daemon's user hold their roles",
                groups=missing,
            )

    def roles(self, peer: Peer) -> frozenset[Role]:
        if peer.uid in (0, self._own_uid):
            return EVERY_ROLE
        return frozenset(role for role, gids in self.groups.items() if gids & peer.groups)


def groups_for(config: AccessSection, role: Role) -> tuple[str, ...]:
    """The groups the config names for a role."""
    match role:
        case Role.TECHNICIAN:
            return config.technician
        case Role.DEALER:
            return config.dealer
        case Role.FLOORPERSON:
            return config.floorperson
