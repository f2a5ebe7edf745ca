"""Fitness results, their ranking (non-finite last), per-candidate seeds and the score cache.

A fitness is any callable `fitness(arch, seed) -> FitnessResult` (a bare float is accepted too). The
seed is derived from the search seed and the candidate's evaluation index, so a stochastic fitness gives
the same numbers serially, in worker processes, and after a resume.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

log = logging.getLogger("ctrnas.search")


@dataclass(frozen=True)
class FitnessResult:
    """One score: `value` is what the search ranks by; `terms` its parts (e.g. SiGeo's three); `meta` anything else."""

    value: float
    terms: dict[str, float] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def finite(self) -> bool:
        return math.isfinite(self.value)


class Fitness(Protocol):
    def __call__(self, arch: Any, seed: int) -> FitnessResult | float: ...


def as_result(out: FitnessResult | float) -> FitnessResult:
    """Accept a bare number from simple fitness functions; reject anything else early."""
    if isinstance(out, FitnessResult):
        return FitnessResult(float(out.value), dict(out.terms), dict(out.meta))
    if isinstance(out, (int, float, np.floating, np.integer)) and not isinstance(out, bool):
        return FitnessResult(float(out))
    raise TypeError(f"a fitness must return FitnessResult or a number, got {type(out).__name__} {out!r}")


def rank_value(value: float, maximize: bool) -> float:
    """Higher is better; NaN and ±inf become -inf so they rank below every finite score."""
    if not math.isfinite(value):
        return -math.inf
    return value if maximize else -value


def candidate_seed(search_seed: int, index: int) -> int:
    """The seed of evaluation number `index`: independent streams per candidate, fixed by (seed, index)."""
    return int(np.random.SeedSequence([search_seed, index]).generate_state(1, dtype=np.uint32)[0])


def warn_non_finite(key: str, index: int, result: FitnessResult) -> None:
    """Log a NaN/inf score once per evaluation; the candidate stays in the history but ranks last."""
    if not result.finite:
        log.warning("candidate %d (%s) scored %r; it ranks last (terms: %s)", index, key, result.value, result.terms)


class ScoreCache:
    """Results keyed by architecture key; counts hits and misses so callers can see what was saved."""

    def __init__(self, entries: dict[str, FitnessResult] | None = None):
        self._entries: dict[str, FitnessResult] = dict(entries or {})
        self.hits = 0
        self.misses = 0

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> FitnessResult | None:
        result = self._entries.get(key)
        if result is None:
            self.misses += 1
        else:
            self.hits += 1
        return result

    def put(self, key: str, result: FitnessResult) -> None:
        self._entries[key] = result

    def state_dict(self) -> dict:
        return {"entries": dict(self._entries), "hits": self.hits, "misses": self.misses}

    def load_state_dict(self, state: dict) -> None:
        self._entries = dict(state["entries"])
        self.hits, self.misses = state["hits"], state["misses"]


def call_fitness(fitness: Callable, arch: Any, seed: int) -> FitnessResult:
    """Call `fitness(arch, seed)` and normalise its return value."""
    return as_result(fitness(arch, seed))
