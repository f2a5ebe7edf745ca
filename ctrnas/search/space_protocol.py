"""The interface a search space must offer to be searched, and helpers around architecture identity."""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Arch(Protocol):
    """An architecture: immutable, picklable (checkpoints and worker processes need it), with a stable key."""

    def key(self) -> str:
        """A string equal for two architectures iff they build the same network (used for de-duplication)."""
        ...


@runtime_checkable
class SearchSpace(Protocol):
    """What a strategy needs from a space; the NASRec space and the NB201 adapter both provide it."""

    def sample(self, rng: np.random.Generator) -> Arch:
        """A random architecture drawn with `rng` (and no other randomness)."""
        ...

    def mutate(self, arch: Arch, rng: np.random.Generator) -> Arch:
        """A copy of `arch` with exactly one choice re-drawn (it may re-draw the same value)."""
        ...


def arch_key(arch: Any) -> str:
    """The de-duplication key of `arch` (its `key()`), checked to be a string."""
    key = arch.key()
    if not isinstance(key, str):
        raise TypeError(f"arch.key() must return str, got {type(key).__name__} {key!r}")
    return key


def default_to_json(arch: Any) -> Any:
    """A JSON-ready view of `arch`: its `to_json()`/`to_dict()` if it has one, a dataclass as a dict, else its key."""
    for name in ("to_json", "to_dict"):
        method = getattr(arch, name, None)
        if callable(method):
            return method()
    if dataclasses.is_dataclass(arch) and not isinstance(arch, type):
        return dataclasses.asdict(arch)
    return arch_key(arch)
