"""Models that grow without changing what older code wrote. Pure.

A journal keeps each input as JSON and the hash of each state the core left; replay re-runs
old inputs through the current code and compares. A field added later is therefore left out
of a model's JSON while it holds its default: the same facts serialise to the same bytes as
before the field existed, and an old row validates with the default.
"""

from __future__ import annotations

from functools import cache
from typing import Any, ClassVar

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer


class Evolving(BaseModel):
    """A model whose `LATER_FIELDS` are omitted from its dump while at their default."""

    LATER_FIELDS: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _without_later_defaults(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name, default in _later_defaults(type(self)):
                if name in data and getattr(self, name) == default:
                    del data[name]
        return data


@cache
def _later_defaults(model: type[Evolving]) -> tuple[tuple[str, Any], ...]:
    """Each later field with its default, made once per model: the core dumps its state at
    every step, and a default factory (or its deep copy) each time was most of that."""
    fields = model.model_fields
    return tuple(
        (name, fields[name].get_default(call_default_factory=True))
        for name in sorted(model.LATER_FIELDS)
    )
