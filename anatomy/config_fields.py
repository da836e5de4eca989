"""The fields of a config dataclass (ModelConfig, TrainConfig in anatomy/config.py): each checked
against its annotation, a config built from a dict that names no unknown field, and a field's value
read from command-line text. Generic, so that config.py holds the settings themselves.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal

from anatomy.errors import AnatomyError


def check_field_types(cfg: Any) -> None:
    """Check each field against its annotation; Literal fields must hold an allowed value."""
    hints = typing.get_type_hints(type(cfg))
    name = type(cfg).__name__
    for field in dataclasses.fields(cfg):
        value = getattr(cfg, field.name)
        expected = hints[field.name]
        if not _matches(value, expected):
            raise AnatomyError(f"{name}.{field.name} = {value!r} is not valid: expected {_describe(expected)}")


def _matches(value: Any, expected: Any) -> bool:
    origin = typing.get_origin(expected)
    if origin is Literal:
        return value in typing.get_args(expected)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in typing.get_args(expected))
    if expected is type(None):
        return value is None
    if expected is bool:
        return isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, expected)


def _describe(expected: Any) -> str:
    origin = typing.get_origin(expected)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(expected))
    if typing.get_args(expected):
        return " or ".join(_describe(a) for a in typing.get_args(expected))
    return "None" if expected is type(None) else expected.__name__


def require_positive(cfg: Any, *names: str) -> None:
    for field_name in names:
        value = getattr(cfg, field_name)
        if value is not None and value <= 0:
            raise AnatomyError(
                f"{type(cfg).__name__}.{field_name} = {value!r} is not valid: expected a positive number"
            )


def config_from_dict(cls: type, data: dict[str, Any], source: str = "config") -> Any:
    """Build a config dataclass from a dict; unknown keys are an error, never silently dropped."""
    if not isinstance(data, dict):
        raise AnatomyError(f"{source}: expected a mapping of {cls.__name__} fields, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise AnatomyError(
            f"{source}: unknown {cls.__name__} field(s) {', '.join(unknown)}; known fields: {', '.join(sorted(known))}"
        )
    return cls(**data)


def parse_value(cls: type, key: str, raw: str) -> Any:
    """Turn the text of a command-line `key=value` into the field's type (int, float, bool, str)."""
    hints = typing.get_type_hints(cls)
    expected = hints[key]
    is_union = typing.get_origin(expected) in (typing.Union, types.UnionType)
    kinds = typing.get_args(expected) if is_union else (expected,)
    if raw.lower() in ("none", "null") and type(None) in kinds:
        return None
    for kind in kinds:
        if kind is bool:
            if raw.lower() in ("true", "1", "yes"):
                return True
            if raw.lower() in ("false", "0", "no"):
                return False
        elif kind is int:
            try:
                return int(raw)
            except ValueError:
                pass
        elif kind is float:
            try:
                return float(raw)
            except ValueError:
                pass
    return raw  # strings and Literal values; the dataclass check names what was allowed
