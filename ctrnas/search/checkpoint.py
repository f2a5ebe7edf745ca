"""Search checkpoints: one JSON file per search, replaced atomically after every generation.

A checkpoint holds the strategy's state (population, seen keys, generation, RNG state), the history,
the score cache and a fingerprint of the configuration; resuming under a different configuration
would silently produce a different search, so it is refused. The file may come from someone else (a shared
run folder), so it is JSON, never a pickle: the fingerprint is compared before the state is decoded, and
the state names only dataclasses already imported by this process (architectures, records, results) from
ctrnas or the search's own space module, built through their own constructors; nothing is imported or
called by name from the file.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any, Iterable

from ctrnas.errors import CtrnasError
from ctrnas.files import atomic_write_bytes, read_bytes

FORMAT = "ctrnas-search-checkpoint/2"


class CheckpointError(CtrnasError):
    """A checkpoint that cannot be read or does not belong to this search."""


def _encode(x: Any) -> Any:
    """`x` as JSON values; tuples, sets, non-string keys, non-finite floats and dataclasses tagged."""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return float(x) if math.isfinite(x) else {"~float": repr(float(x))}
    if hasattr(x, "dtype") and hasattr(x, "item") and getattr(x, "shape", None) == ():  # numpy scalar
        return _encode(x.item())
    if isinstance(x, list):
        return [_encode(v) for v in x]
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return {"~tuple": [_encode(v) for v in x]}
    if isinstance(x, (set, frozenset)):
        return {"~set": sorted((_encode(v) for v in x), key=lambda v: json.dumps(v, sort_keys=True))}
    if isinstance(x, dict):
        if all(isinstance(k, str) and not k.startswith("~") for k in x):
            return {k: _encode(v) for k, v in x.items()}
        return {"~items": [[_encode(k), _encode(v)] for k, v in x.items()]}
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        cls = type(x)
        return {"~dataclass": f"{cls.__module__}:{cls.__qualname__}",
                "fields": {f.name: _encode(getattr(x, f.name)) for f in dataclasses.fields(x)}}
    raise CheckpointError(f"cannot write a {type(x).__name__} into a search checkpoint (JSON values, tuples, "
                          "sets and dataclasses only)")


def _dataclass(name: str, modules: frozenset[str]) -> type:
    """The dataclass `module:qualname`, only from ctrnas or `modules` and only if its module is already
    imported (a file never imports)."""
    module, _, qualname = name.partition(":")
    if not (module.startswith("ctrnas.") or module in modules):
        raise ValueError(f"class {name!r} is not of ctrnas or of the search's space")
    obj = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None) if obj is not None and not part.startswith("__") else None
    if not (isinstance(obj, type) and dataclasses.is_dataclass(obj)):
        raise ValueError(f"unknown class {name!r}")
    return obj


def _decode(x: Any, modules: frozenset[str] = frozenset()) -> Any:
    if isinstance(x, list):
        return [_decode(v, modules) for v in x]
    if not isinstance(x, dict):
        return x
    if "~float" in x:
        return float(x["~float"]) if x["~float"] in ("nan", "inf", "-inf") else _bad(x)
    if "~tuple" in x:
        return tuple(_decode(v, modules) for v in x["~tuple"])
    if "~set" in x:
        return {_decode(v, modules) for v in x["~set"]}
    if "~items" in x:
        return {_decode(k, modules): _decode(v, modules) for k, v in x["~items"]}
    if "~dataclass" in x:
        cls = _dataclass(x["~dataclass"], modules)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values = {k: _decode(v, modules) for k, v in x["fields"].items()}
        if set(values) - set(fields):
            raise ValueError(f"{x['~dataclass']}: unknown fields {sorted(set(values) - set(fields))}")
        obj = cls(**{k: v for k, v in values.items() if fields[k].init})
        for k, v in values.items():
            if not fields[k].init:
                object.__setattr__(obj, k, v)
        return obj
    return {k: _decode(v, modules) for k, v in x.items()}


def _short(x: Any, limit: int = 300) -> str:
    """repr of `x` cut to `limit` characters (a fingerprint from a file may be huge or nested too deeply)."""
    try:
        text = repr(x)
    except RecursionError:
        return "(nested too deeply)"
    return text if len(text) <= limit else text[:limit] + " ..."


def _bad(x: Any) -> Any:
    raise ValueError(f"bad value {x!r}")


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Write `state` (with its "fingerprint") to `path` so that a crash mid-write leaves the previous
    checkpoint intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = dict(state)
    doc = {"format": FORMAT, "fingerprint": json.loads(json.dumps(state.pop("fingerprint"), default=str)),
           "state": _encode(state)}
    atomic_write_bytes(path, json.dumps(doc).encode("utf-8"), fsync=True)


def load_checkpoint(path: str | Path, fingerprint: dict[str, Any],
                    modules: Iterable[str] = ()) -> dict[str, Any]:
    """Read a checkpoint written by `save_checkpoint` and check it was made by the same search setup before
    decoding its state; `modules`: modules besides ctrnas's whose dataclasses it may hold (the space's)."""
    path = Path(path)
    try:
        doc = json.loads(read_bytes(path, "search checkpoint").decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested too deeply
        raise CheckpointError(f"damaged {path}: not a ctrnas search checkpoint (not JSON; a checkpoint of an older "
                              "ctrnas is a pickle, which is never loaded: delete it to search again)") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a ctrnas search checkpoint (expected format {FORMAT!r})")
    mine = json.loads(json.dumps(fingerprint, default=str))
    try:
        same = doc.get("fingerprint") == mine
    except RecursionError:
        same = False
    if not same:
        raise CheckpointError(
            f"{path}: checkpoint was written by a different search setup "
            f"({_short(doc.get('fingerprint'))} != {_short(mine)}); delete it or use another path"
        )
    try:
        state = _decode(doc.get("state"), frozenset(modules))
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise CheckpointError(f"{path}: damaged search checkpoint: {e}") from None
    except RecursionError:
        raise CheckpointError(f"{path}: damaged search checkpoint: nested too deeply") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: damaged search checkpoint: no state")
    return {"fingerprint": fingerprint, **state}
