"""A frozen pydantic model with some fields changed: what each model's typed `replace` does. Pure.

pydantic's `model_copy(update=...)` copies through `__copy__`, which runs the `copy` module on
the fields, the extra fields and the set of fields set, one by one, and only then applies the
update. The core does this two or three times a step, on a state of some forty fields, and a
step's CPU is what a lock-out waits behind (issue 15). `replaced` builds the same instance in
one merge: the fields, the fields set (those named are added, as model_copy adds them), no
extra fields and no private attributes -- the instance attributes pydantic documents on
`BaseModel`. It is for models that have neither (`extra` not "allow", no `PrivateAttr`);
tests/test_typed_updates.py holds its result equal to model_copy's, attribute by attribute.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def replaced(model: M, update: Mapping[str, object]) -> M:
    """`model.model_copy(update=update)`, for a model without extra fields or private ones."""
    copied = object.__new__(type(model))
    object.__setattr__(copied, "__dict__", {**model.__dict__, **update})
    fields_set = model.__pydantic_fields_set__ | update.keys()
    object.__setattr__(copied, "__pydantic_fields_set__", fields_set)
    object.__setattr__(copied, "__pydantic_extra__", None)
    object.__setattr__(copied, "__pydantic_private__", None)
    return copied
