"""Models that grow without changing what older code wrote. Pure.

A journal keeps each input as JSON and the hash of each state the core left; replay re-runs
old inputs through the current code and compares. A field added later is therefore left out
of a model's JSON while it holds its default: the same facts serialise to the same bytes as
before the field existed, and an old row validates with the default.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer


class Evolving(BaseModel):
    """A model whose `LATER_FIELDS` are omitted from its dump while at their default."""

    LATER_FIELDS: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _without_later_defaults(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            fields = type(self).model_fields
            for name in self.LATER_FIELDS:
                if name in data and getattr(self, name) == fields[name].get_default(
                    call_default_factory=True
                ):
                    del data[name]
        return data
