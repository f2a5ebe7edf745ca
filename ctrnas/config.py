"""Typed configs: frozen dataclasses filled from YAML/JSON with strict key and type checks."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from ctrnas.errors import RecipeError

T = TypeVar("T")


def _type_name(tp) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _convert(value: Any, tp, source: str, key: str):
    """Check `value` against annotation `tp`; return it converted (lists -> tuples, dicts -> dataclasses)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [arg for arg in args if arg is not type(None)]
        if len(options) == 1:  # `X | None`: X's own error (naming the inner key and range) says more
            return _convert(value, options[0], source, key)
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(value, arg, source, key)
            except RecipeError as e:
                errors.append(e)
        raise RecipeError(source, key, f"expected {_type_name(tp)}, got {type(value).__name__} {value!r}")
    if origin is typing.Literal:
        if value not in args:
            raise RecipeError(source, key, f"expected one of {list(args)}, got {value!r}")
        return value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise RecipeError(source, key, f"expected a mapping for {tp.__name__}, got {type(value).__name__}")
        return from_dict(tp, value, source, prefix=f"{key}.")
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise RecipeError(source, key, f"expected a list, got {type(value).__name__} {value!r}")
        item_tp = args[0] if args else Any
        return tuple(_convert(v, item_tp, source, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise RecipeError(source, key, f"expected a mapping, got {type(value).__name__}")
        ktp, vtp = args if args else (Any, Any)
        return {_convert(k, ktp, source, key): _convert(v, vtp, source, f"{key}.{k}") for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RecipeError(source, key, f"expected float, got {type(value).__name__} {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise RecipeError(source, key, f"expected int, got {type(value).__name__} {value!r}")
        return value
    if tp is bool or tp is str:
        if not isinstance(value, tp):
            raise RecipeError(source, key, f"expected {tp.__name__}, got {type(value).__name__} {value!r}")
        return value
    if isinstance(tp, type) and not isinstance(value, tp):
        raise RecipeError(source, key, f"expected {_type_name(tp)}, got {type(value).__name__} {value!r}")
    return value


def from_dict(cls: type[T], data: dict, source: str = "<dict>", prefix: str = "") -> T:
    """Build dataclass `cls` from `data`; unknown keys and wrong types raise RecipeError naming the key."""
    if not isinstance(data, dict):
        raise RecipeError(source, prefix.rstrip(".") or "<root>", f"expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(typing.cast(Any, cls)) if f.init}
    for key in data:
        if key not in fields:
            raise RecipeError(source, prefix + str(key), f"unknown key (known: {', '.join(sorted(fields))})")
    kwargs = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = _convert(data[name], hints[name], source, prefix + name)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise RecipeError(source, prefix + name, f"missing required key of type {_type_name(hints[name])}")
    try:
        return cls(**kwargs)
    except RecipeError as e:  # a range check in __post_init__: name this file and the dotted key
        if e.source == source:
            raise
        absolute = not prefix or e.key == prefix[:-1] or e.key.startswith(prefix)
        raise RecipeError(source, e.key if absolute else prefix + e.key, e.reason) from None


def to_dict(obj) -> dict:
    """Plain dict of a (nested) dataclass, tuples as lists, ready for JSON/YAML."""

    def plain(v):
        if dataclasses.is_dataclass(v):
            return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    return plain(obj)


def load_yaml(path: str | Path) -> dict:
    """Read a YAML mapping; a syntax error names the file."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        raise RecipeError(str(path), "<file>", f"not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except yaml.YAMLError as e:
        raise RecipeError(str(path), "<file>", f"not valid YAML: {' '.join(str(e).split())}") from None
    except OSError as e:
        raise RecipeError(str(path), "<file>", f"cannot read: {e.strerror}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise RecipeError(str(path), "<root>", "expected a mapping at the top level")
    return data


def load_config(cls: type[T], path: str | Path) -> T:
    """Load YAML file `path` into dataclass `cls` with strict checks."""
    return from_dict(cls, load_yaml(path), source=str(path))
