"""Models that grow without changing what older code wrote. Pure.

A journal keeps each input as JSON and the hash of each state the core left; replay re-runs
old inputs through the current code and compares. A field added later is therefore left out
of a model's JSON while it holds its default: the same facts serialise to the same bytes as
before the field existed, and an old row validates with the default.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel, Field

T = TypeVar("T")


def later(default: T) -> T:
    """A field added after journals were written: its default, and left out of the model's
    JSON while it holds it. Judged by pydantic's own serializer (`exclude_if`), field by
    field: the core dumps its state at every step."""
    field: T = Field(default=default, exclude_if=_holds(default))
    return field  # pydantic's FieldInfo, which stands for the default in a class body


def _holds(default: object) -> Callable[[object], bool]:
    """Whether a field holds its default. A model's `==` is Python code, run at every dump of
    the state; a field never changed holds the default object itself, so it is asked first
    whether it is that object (`==` holds then too). Values of built-in types are compared
    by `==` alone (in C: asking first would only add a call)."""
    if isinstance(default, BaseModel):
        return lambda value: value is default or default == value
    return functools.partial(operator.eq, default)
