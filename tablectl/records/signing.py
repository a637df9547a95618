"""The table's signing key, the export manifest, and checking an export against both.

Each table has one Ed25519 key (`cryptography`), made once at install (the Debian package's
postinst, or `tablectl records key --init`) and never replaced by tablectl: it is what makes
an export the table's. The private key is PKCS#8 PEM, mode 0600, owned by the table's user
(`tablectl`); its public half, printed by `tablectl records key`, is what an auditor keeps.

An export directory holds its files, `manifest.json` (the period, the table, the journal's
first and last seq, each file's rows, size and SHA-256) and `manifest.sig`: the raw 64-byte
Ed25519 signature of manifest.json's exact bytes, so it can also be checked without tablectl
(`openssl pkeyutl -verify -pubin -inkey table.pub -rawin -in manifest.json -sigfile
manifest.sig`). `verify_export` checks the signature, every file's hash, that nothing was
added, and that the journal rows chain (docs/records.md).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, ValidationError

from tablectl.store.chain import row_digest
from tablectl.store.journal import canonical_json

MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
FORMAT: Literal["tablectl-records/1"] = "tablectl-records/1"
KEY_MODE = 0o600


class SigningError(Exception):
    """The key cannot be made, read or used; the message says what to do."""


# --- the key ------------------------------------------------------------------------------


def create_key(path: Path) -> Ed25519PrivateKey:
    """Make the table's key at path (0600). Refuses to replace one: it is the table's identity.

    Run as root, the file is given to the owner of its directory (the table's user), so the
    key made at install is readable by the user that exports, and by nobody else."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, KEY_MODE)
    except FileExistsError:
        raise SigningError(
            f"{path} exists: it is this table's signing key and is never replaced "
            "(an auditor holds its public half); move it away by hand to make another"
        ) from None
    except OSError as exc:
        raise SigningError(f"cannot create {path}: {exc.strerror}") from None
    try:
        os.write(fd, pem)
        os.fsync(fd)
        if os.geteuid() == 0:
            owner = path.parent.stat()
            os.fchown(fd, owner.st_uid, owner.st_gid)
    finally:
        os.close(fd)
    return key


def load_key(path: Path) -> Ed25519PrivateKey:
    try:
        mode = path.stat().st_mode
        pem = path.read_bytes()
    except FileNotFoundError:
        raise SigningError(
            f"no signing key at {path}: make it once with `tablectl records key --init`"
        ) from None
    except PermissionError:
        raise SigningError(
            f"cannot read the signing key {path}: run as the table's user "
            "(sudo -u tablectl tablectl records ...)"
        ) from None
    if mode & (stat.S_IRWXO | stat.S_IWGRP):
        raise SigningError(
            f"{path} is mode {stat.S_IMODE(mode):04o}: others may read or change it; "
            f"chmod {KEY_MODE:04o} it (and ask whether it is still the table's)"
        )
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise SigningError(f"{path} is not a PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningError(f"{path} is not an Ed25519 key")
    return key


def public_pem(key: Ed25519PublicKey) -> str:
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


def load_public_key(pem: bytes, where: str) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError):
        raise SigningError(f"{where} is not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise SigningError(f"{where} is not an Ed25519 public key")
    return key


def fingerprint(key: Ed25519PublicKey) -> str:
    """SHA256:<base64>, as OpenSSH prints key fingerprints."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "SHA256:" + base64.b64encode(hashlib.sha256(raw).digest()).decode().rstrip("=")


# --- the manifest -------------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Period(_Model):
    start_utc: str  # inclusive
    end_utc: str  # exclusive
    time_zone: str  # the zone of every local date and time in the files
    start_local: str
    end_local: str


class JournalSpan(_Model):
    rows: int
    first_seq: int | None
    last_seq: int | None
    first_prev_hash: str | None  # chains to the row before the period (journal verify)
    last_hash: str | None
    journal_last_seq: int  # the journal's last row when the snapshot was taken


class ManifestFile(_Model):
    name: str
    sheet: str | None  # None: the PDF report
    format: Literal["csv", "jsonl", "pdf"]
    rows: int | None
    bytes: int
    sha256: str


class Manifest(_Model):
    format: Literal["tablectl-records/1"] = FORMAT
    site: str
    table: str
    game: str | None
    period: Period
    journal: JournalSpan
    generated_utc: str
    generator: str
    unknown_record_types: dict[str, int]  # rows in other-events, by type
    files: list[ManifestFile]
    public_key: str  # PEM: the key that signed this manifest
    key_fingerprint: str


def sha256_file(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def write_signed(directory: Path, manifest: Manifest, key: Ed25519PrivateKey) -> None:
    """manifest.json and its signature, manifest.sig (the raw 64 bytes)."""
    text = (manifest.model_dump_json(indent=2) + "\n").encode()
    (directory / MANIFEST).write_bytes(text)
    (directory / SIGNATURE).write_bytes(key.sign(text))


# --- verifying ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.message}"


@dataclass(frozen=True, slots=True)
class Verified:
    """What verify_export found: no problems means the export is intact and signed."""

    problems: list[Problem]
    manifest: Manifest | None
    key_fingerprint: str | None
    key_given: bool  # checked against a key the auditor holds, not the manifest's own

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_export(directory: Path, public_key: Ed25519PublicKey | None = None) -> Verified:
    """Check an export: its manifest's signature (against public_key, or the key the manifest
    carries), each file's size and SHA-256, no file beyond those listed, the journal chain."""

    def failed(file: str, message: str) -> Verified:
        return Verified([Problem(file, message)], None, None, public_key is not None)

    try:
        text = (directory / MANIFEST).read_bytes()
    except OSError as exc:
        return failed(MANIFEST, f"cannot read it: {exc.strerror}")
    try:
        signature = (directory / SIGNATURE).read_bytes()
    except OSError as exc:
        return failed(SIGNATURE, f"cannot read it: {exc.strerror}")
    try:
        manifest = Manifest.model_validate_json(text)
    except ValidationError as exc:
        return failed(MANIFEST, f"not a {FORMAT} manifest: {exc.errors()[0]['msg']}")
    try:
        own_key = load_public_key(manifest.public_key.encode(), "its public_key")
    except SigningError as exc:
        return failed(MANIFEST, str(exc))
    key = public_key or own_key
    try:
        key.verify(signature, text)
    except InvalidSignature:
        if public_key is not None and fingerprint(public_key) != fingerprint(own_key):
            return failed(
                SIGNATURE,
                f"not made with the given key {fingerprint(public_key)} (the manifest names "
                f"{fingerprint(own_key)}): this is not that table's export",
            )
        return failed(
            MANIFEST,
            "does not match its signature (manifest.sig): it was changed after signing, "
            "or the signature is not its own",
        )
    problems: list[Problem] = []
    listed = {f.name for f in manifest.files}
    for entry in manifest.files:
        path = directory / entry.name
        if Path(entry.name).name != entry.name:
            problems.append(Problem(entry.name, "names a path outside the export"))
            continue
        try:
            digest, size = sha256_file(path)
        except OSError as exc:
            problems.append(Problem(entry.name, f"cannot read it: {exc.strerror}"))
            continue
        if size != entry.bytes or digest != entry.sha256:
            problems.append(
                Problem(
                    entry.name,
                    f"SHA-256 {digest[:16]}... ({size} bytes) is not the signed "
                    f"{entry.sha256[:16]}... ({entry.bytes} bytes): the file was changed",
                )
            )
        elif entry.sheet == "journal":
            problems += _chain_problems(path, entry.format, manifest.journal)
    for path in sorted(directory.iterdir()):
        if path.name not in listed and path.name not in (MANIFEST, SIGNATURE):
            problems.append(Problem(path.name, "is not listed in the signed manifest"))
    return Verified(problems, manifest, fingerprint(key), public_key is not None)


_ExportedRow = tuple[int, int, str, str, str, str, str, str, str]


def _journal_rows(path: Path, fmt: str) -> Iterator[_ExportedRow]:
    """(hash_v, seq, event_id, ts, boot_id, type, data text, prev_hash, hash) of an exported
    journal file (an export without hash_v is of formula 1 rows)."""
    with path.open(encoding="utf-8", newline="") as f:
        rows = csv.DictReader(f) if fmt == "csv" else (json.loads(line) for line in f)
        for r in rows:
            data = r["data"]
            yield (
                int(r.get("hash_v") or 1),
                int(r["seq"]),
                r["event_id"],
                r["ts"],
                r["boot_id"],
                r["type"],
                data if isinstance(data, str) else canonical_json(data),
                r["prev_hash"],
                r["hash"],
            )


def _chain_problems(path: Path, fmt: str, span: JournalSpan) -> list[Problem]:
    """The exported rows chain as the table journaled them, from the manifest's first
    prev_hash to its last hash (a signed export whose rows were rewritten would not)."""
    prev = span.first_prev_hash
    expected_seq = span.first_seq
    count = 0
    try:
        for row in _journal_rows(path, fmt):
            version, seq, event_id, ts, boot_id, type_, data, prev_hash, digest = row
            if seq != expected_seq or prev_hash != prev:
                return [Problem(path.name, f"the rows do not chain at seq {seq}")]
            if row_digest(version, prev_hash, seq, event_id, ts, boot_id, type_, data) != digest:
                return [Problem(path.name, f"seq {seq} does not match its hash")]
            prev, expected_seq, count = digest, seq + 1, count + 1
    except (ValueError, KeyError, TypeError) as exc:
        return [Problem(path.name, f"not a journal file: {exc}")]
    if count != span.rows or (count and prev != span.last_hash):
        return [Problem(path.name, f"{count} rows, the manifest says {span.rows}")]
    return []
