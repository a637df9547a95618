"""`tablectl mqtt schema`: the MQTT contract as an AsyncAPI 3 document (docs/asyncapi.json)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tablectl.cli.common import EXIT_OK, EXIT_REFUSED


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mqtt = sub.add_parser("mqtt", help="the MQTT contract backends program against")
    mqtt_sub = mqtt.add_subparsers(dest="mqtt_verb", required=True)
    schema = mqtt_sub.add_parser(
        "schema", help="print the AsyncAPI 3 document generated from the message models"
    )
    where = schema.add_mutually_exclusive_group()
    where.add_argument("--write", type=Path, metavar="FILE", help="write it to FILE")
    where.add_argument(
        "--check", type=Path, metavar="FILE", help="exit 1 unless FILE is what the code says"
    )
    schema.set_defaults(handler=_schema)


def document_text() -> str:
    from tablectl.mqtt.contract import asyncapi_document

    return json.dumps(asyncapi_document(), indent=2) + "\n"


def _schema(args: argparse.Namespace) -> int:
    text = document_text()
    if args.write:
        args.write.write_text(text)
    elif args.check:
        current = args.check.read_text() if args.check.exists() else ""
        if current != text:
            print(
                f"tablectl: {args.check} differs from the contract in the code; "
                f"regenerate it: tablectl mqtt schema --write {args.check}",
                file=sys.stderr,
            )
            return EXIT_REFUSED
        print(f"{args.check}: matches the code")
    else:
        sys.stdout.write(text)
    return EXIT_OK
