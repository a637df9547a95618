"""`tablectl mqtt schema`: the MQTT contract as an AsyncAPI 3 document (docs/asyncapi.json)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tablectl.cli.common import EXIT_BAD_INPUT, EXIT_OK, EXIT_REFUSED, fail, path_arg, text


@text
def _json_file(text: str) -> Path:
    path = path_arg(text)
    if path.suffix != ".json":
        raise argparse.ArgumentTypeError(f"{text!r}: the document is a .json file")
    return path


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mqtt = sub.add_parser("mqtt", help="the MQTT contract backends program against")
    mqtt_sub = mqtt.add_subparsers(dest="mqtt_verb", required=True)
    schema = mqtt_sub.add_parser(
        "schema", help="print the AsyncAPI 3 document generated from the message models"
    )
    where = schema.add_mutually_exclusive_group()
    where.add_argument("--write", type=_json_file, metavar="FILE", help="write it to FILE")
    where.add_argument(
        "--check", type=_json_file, metavar="FILE", help="exit 1 unless FILE is what the code says"
    )
    schema.add_argument("--json", action="store_true", help="--write/--check answer in JSON")
    schema.set_defaults(handler=_schema)


def document_text() -> str:
    from tablectl.mqtt.contract import asyncapi_document

    return json.dumps(asyncapi_document(), indent=2) + "\n"


def _done(args: argparse.Namespace, message: str) -> int:
    print(json.dumps({"ok": True, "file": message}) if args.json else message)
    return EXIT_OK


def _schema(args: argparse.Namespace) -> int:
    text = document_text()
    if args.write:
        try:
            args.write.write_text(text)
        except OSError as exc:
            return fail(args, f"cannot write {args.write}: {exc.strerror}", EXIT_REFUSED)
        return _done(args, f"{args.write}: written")
    if args.check:
        try:
            current = args.check.read_text()
        except OSError as exc:
            # A file named on the command line that is not there is bad input, as a missing
            # config is (exit 2); a document that differs is a failed check (exit 1).
            return fail(args, f"cannot read {args.check}: {exc.strerror}", EXIT_BAD_INPUT)
        if current != text:
            return fail(
                args,
                f"{args.check} differs from the contract in the code; regenerate it: "
                f"tablectl mqtt schema --write {args.check}",
                EXIT_REFUSED,
            )
        return _done(args, f"{args.check}: matches the code")
    sys.stdout.write(text)
    return EXIT_OK
