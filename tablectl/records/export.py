"""`tablectl records`: a period's record set, written to a directory and signed.

From one read-only snapshot of the journal (`source.snapshot`), the rows of the period
[start, end) are routed to the sheets (`sheets.ROUTES`, `build.RecordSetBuilder`) and written
as CSV and/or JSON lines (`writers`) and/or a PDF report (`pdf`); then `manifest.json`
(period, table, first/last seq, each file's rows and SHA-256) is written and signed with the
table's key (`signing`). docs/records.md describes the set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tablectl.records.build import RecordSetBuilder, Summary
from tablectl.records.signing import (
    JournalSpan,
    Manifest,
    ManifestFile,
    Period,
    fingerprint,
    public_pem,
    sha256_file,
    write_signed,
)
from tablectl.records.source import snapshot
from tablectl.records.writers import SheetFiles, TextFormat
from tablectl.store.journal import journal_ts

Format = Literal["csv", "jsonl", "pdf"]
FORMATS: tuple[Format, ...] = ("csv", "jsonl", "pdf")
REPORT_PDF = "report.pdf"


class ExportError(Exception):
    """The export cannot be made (its directory, the period); nothing was signed."""


@dataclass(frozen=True, slots=True)
class ExportRequest:
    database: Path
    site: str
    table: str
    game: str | None
    start: datetime  # aware; inclusive
    end: datetime  # aware; exclusive
    zone: ZoneInfo  # of every local date and time in the files
    formats: tuple[Format, ...]
    out: Path
    generator: str  # "tablectl 0.1.0"


@dataclass(frozen=True, slots=True)
class Exported:
    manifest: Manifest
    summary: Summary


def prepare_directory(out: Path) -> None:
    """A new or empty directory (0750): an export never mixes with other files."""
    if out.exists():
        if not out.is_dir():
            raise ExportError(f"{out} exists and is not a directory")
        if any(out.iterdir()):
            raise ExportError(f"{out} is not empty: an export goes to a new or empty directory")
        return
    try:
        out.mkdir(mode=0o750, parents=True)
    except OSError as exc:
        raise ExportError(f"cannot create {out}: {exc.strerror}") from None


def export_records(request: ExportRequest, key: Ed25519PrivateKey) -> Exported:
    """Write and sign the record set; on any failure nothing is left in the directory (an
    unsigned half-export is worse than none)."""
    if request.start >= request.end:
        raise ExportError(f"--from {request.start} is not before --to {request.end}")
    if not request.formats:
        raise ExportError("no format asked for")
    made = not request.out.exists()
    prepare_directory(request.out)
    try:
        return _export(request, key)
    except BaseException:
        for path in request.out.iterdir():
            path.unlink()
        if made:
            request.out.rmdir()
        raise


def _export(request: ExportRequest, key: Ed25519PrivateKey) -> Exported:
    start_ts, end_ts = journal_ts(request.start), journal_ts(request.end)
    text_formats: tuple[TextFormat, ...] = tuple(
        f for f in request.formats if f == "csv" or f == "jsonl"
    )
    files = SheetFiles(request.out, text_formats)
    try:
        with snapshot(request.database) as snap:
            builder = RecordSetBuilder(
                table=request.table,
                zone=request.zone,
                sink=files,
                period_start_ts=start_ts,
                meters_before=snap.meters_before(start_ts),
                power_ups=snap.power_ups(end_ts),
            )
            for entry in snap.open_round(start_ts):
                builder.before(entry)
            first_prev_hash = last_hash = None
            for entry in snap.entries(start_ts, end_ts):
                first_prev_hash = first_prev_hash or entry.prev_hash
                last_hash = entry.hash
                builder.add(entry)
            summary = builder.finish()
            journal_last_seq = snap.last_seq()
    finally:
        written = files.close()
    period = Period(
        start_utc=start_ts,
        end_utc=end_ts,
        time_zone=request.zone.key,
        start_local=_local_text(start_ts, request.zone),
        end_local=_local_text(end_ts, request.zone),
    )
    span = JournalSpan(
        rows=summary.rows,
        first_seq=summary.first_seq,
        last_seq=summary.last_seq,
        first_prev_hash=first_prev_hash,
        last_hash=last_hash,
        journal_last_seq=journal_last_seq,
    )
    listed = [_listed(request.out, w.name, w.sheet.value, w.format, w.rows) for w in written]
    public = key.public_key()
    generated = journal_ts(datetime.now(UTC))

    def manifest(files: list[ManifestFile]) -> Manifest:
        return Manifest(
            site=request.site,
            table=request.table,
            game=request.game,
            period=period,
            journal=span,
            generated_utc=generated,
            generator=request.generator,
            unknown_record_types=dict(sorted(summary.unknown_types.items())),
            files=files,
            public_key=public_pem(public),
            key_fingerprint=fingerprint(public),
        )

    if "pdf" in request.formats:
        from tablectl.records.pdf import write_report  # reportlab: only here

        # The report shows what the manifest will say of the other files.
        write_report(request.out / REPORT_PDF, summary, manifest(listed), request.zone)
        listed.append(_listed(request.out, REPORT_PDF, None, "pdf", None))
    signed = manifest(listed)
    write_signed(request.out, signed, key)
    _sync(request.out)
    return Exported(signed, summary)


def _local_text(ts: str, zone: ZoneInfo) -> str:
    return datetime.fromisoformat(ts).astimezone(zone).isoformat(timespec="milliseconds")


def _sync(directory: Path) -> None:
    """A signed export is on disk when we say it is written: its files, then the directory."""
    for path in directory.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _listed(
    directory: Path, name: str, sheet: str | None, fmt: Format, rows: int | None
) -> ManifestFile:
    digest, size = sha256_file(directory / name)
    return ManifestFile(name=name, sheet=sheet, format=fmt, rows=rows, bytes=size, sha256=digest)
