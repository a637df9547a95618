"""Frozen pydantic models built from values already validated: a copy with some fields changed
(what each model's typed `replace` does), and a record built by the core. Pure.

A core step's CPU is what a lock-out waits behind (issue 15), and steps come milliseconds
apart, when every call into pydantic is cold. pydantic's `model_copy(update=...)` goes through
`__copy__`, which runs the `copy` module on the fields, the extra fields and the set of fields
set, one by one, before it applies the update; the core does it two or three times a step on
a state of some forty fields. And a record the core builds from its own state and from inputs
validated when they came in would be validated a second time. Both build here the instance
pydantic would: the fields (in their order, defaults filled in), the fields set, no extra
fields and no private attributes -- the instance attributes pydantic documents on `BaseModel`.
Only for models that have none of what this skips: `extra` not "allow", no private
attributes, and for `trusted` no validator, constraint or default that validation would act
on. tests/test_typed_updates.py holds each equal to pydantic's own, attribute by attribute.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)
P = ParamSpec("P")

# Default values a record may share between instances: never changed in place.
IMMUTABLE = (type(None), bool, int, str, float, tuple, frozenset)


_new, _set = object.__new__, object.__setattr__  # past a frozen model's own __setattr__


def _instance(cls: type[M], fields: dict[str, Any], fields_set: set[str]) -> M:
    built: M = _new(cls)
    _set(built, "__dict__", fields)
    _set(built, "__pydantic_fields_set__", fields_set)
    _set(built, "__pydantic_extra__", None)
    _set(built, "__pydantic_private__", None)
    return built


def replaced(model: M, update: Mapping[str, object]) -> M:
    """`model.model_copy(update=update)`, for a model without extra fields or private ones."""
    fields_set = model.__pydantic_fields_set__
    if not update.keys() <= fields_set:
        fields_set = fields_set | update.keys()
    # Otherwise the copy shares the original's set, the same names: a frozen model's set is
    # never changed in place (model_copy copies it first), and a new one costs a cold step
    # more than the dict of fields does.
    return _instance(type(model), {**model.__dict__, **update}, fields_set)


class _Shape:
    """A model's fields in order, with the defaults of those that have one."""

    __slots__ = ("defaults", "names", "required")

    def __init__(self, cls: type[BaseModel]) -> None:
        decorators = cls.__pydantic_decorators__
        acts = (
            decorators.validators,
            decorators.field_validators,
            decorators.root_validators,
            decorators.model_validators,
        )
        if cls.model_config.get("extra") == "allow" or cls.__private_attributes__ or any(acts):
            raise TypeError(f"{cls.__name__} needs validating: build it with its constructor")
        self.defaults: dict[str, Any] = {}
        required = set()
        for name, info in cls.model_fields.items():
            if info.metadata or info.default_factory is not None or info.validate_default:
                raise TypeError(f"{cls.__name__}.{name} needs validating")
            if info.is_required():
                required.add(name)
            elif not isinstance(info.default, IMMUTABLE):
                raise TypeError(f"{cls.__name__}.{name}: a default shared between instances")
            self.defaults[name] = info.default  # a placeholder for the required ones
        self.required = frozenset(required)
        self.names = set(self.defaults)  # every field: the fields set when each is given


_SHAPES: dict[type[BaseModel], _Shape] = {}


def trusted(model: Callable[P, M], /, *args: P.args, **fields: P.kwargs) -> M:
    """The instance `model(**fields)` validates, built from values already validated.

    mypy checks the names and types against the model's own constructor; at run time the
    names are checked (all required, none unknown), the values taken as they are."""
    cls: type[M] = model  # type: ignore[assignment]  # a model class, as mypy cannot say
    shape = _SHAPES.get(cls) or _SHAPES.setdefault(cls, _Shape(cls))
    values = {**shape.defaults, **fields}
    if args or len(values) != len(shape.defaults):
        raise TypeError(f"{cls.__name__} takes its fields by name, each once: {sorted(fields)}")
    if len(fields) == len(values):
        # Every field given, the usual call: instances share the set, never changed in place.
        return _instance(cls, values, shape.names)
    if not shape.required <= fields.keys():
        raise TypeError(f"{cls.__name__} needs {sorted(shape.required - fields.keys())}")
    return _instance(cls, values, set(fields))
