"""Fitness results, their ranking (non-finite last), per-candidate seeds, budgets and the score cache.

A fitness is any callable `fitness(arch, seed) -> FitnessResult` (a bare float is accepted too), or,
when it can spend less or more of its expensive part, `fitness(arch, seed, budget)`: the budget counts
that part in the fitness's own unit (batches for a proxy, fine-tuning steps for one-shot evaluation,
training steps for a short training) and `fitness.default_budget` is what it spends when given none.
The seed is derived from the search seed and the candidate's evaluation index (`ctrnas.seeds`), so a
stochastic fitness gives the same numbers serially, in worker processes, and after a resume.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable, ItemsView, Protocol

import numpy as np

from ctrnas.seeds import derive_seed

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


class BudgetedFitness(Protocol):
    """A fitness whose cost can be set per call; `default_budget` is its cost when given none."""

    default_budget: int

    def __call__(self, arch: Any, seed: int, budget: int | None = None) -> FitnessResult | float: ...


def default_budget(fitness: Callable[..., Any]) -> int | None:
    """What one call of `fitness` spends when given no budget (None: it takes no budget)."""
    return getattr(fitness, "default_budget", None)


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
    return derive_seed(search_seed, index)


def warn_non_finite(key: str, index: int, result: FitnessResult) -> None:
    """Log a NaN/inf score once per evaluation; the candidate stays in the history but ranks last."""
    if not result.finite:
        log.warning("candidate %d (%s) scored %r; it ranks last (terms: %s)", index, key, result.value, result.terms)


CacheKey = tuple[str, "int | None"]


def _cache_key(key: str | CacheKey, budget: int | None = None) -> CacheKey:
    # a bare architecture key (caches filled before budgets existed, `vision.search.cache_from_csv`)
    # stands for the fitness's default budget, written None
    return (key, budget) if isinstance(key, str) else (key[0], key[1])


class ScoreCache:
    """Results keyed by (architecture key, budget): a score at one budget says nothing about another.
    Counts hits and misses so callers can see what was saved. `entries` may use bare architecture keys,
    which mean budget None (a fitness that takes no budget)."""

    def __init__(self, entries: dict[str, Any] | None = None):
        self._entries: dict[CacheKey, FitnessResult] = {_cache_key(k): v for k, v in (entries or {}).items()}
        self.hits = 0
        self.misses = 0

    def __contains__(self, key: str | CacheKey) -> bool:
        return _cache_key(key) in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def items(self) -> ItemsView[tuple[str, int | None], FitnessResult]:
        """((architecture key, budget), result) pairs, without counting hits."""
        return self._entries.items()

    def get(self, key: str, budget: int | None = None) -> FitnessResult | None:
        result = self._entries.get(_cache_key(key, budget))
        if result is None:
            self.misses += 1
        else:
            self.hits += 1
        return result

    def put(self, key: str, result: FitnessResult, budget: int | None = None) -> None:
        self._entries[_cache_key(key, budget)] = result

    def adopt_unbudgeted(self, budget: int) -> None:
        """Read entries without a budget (a checkpoint from before budgets existed) as scores at `budget`,
        the default budget of the fitness that wrote them."""
        for (key, b), result in list(self._entries.items()):
            if b is None:
                self._entries.setdefault((key, budget), result)
                del self._entries[(key, None)]

    def state_dict(self) -> dict[str, Any]:
        return {"entries": dict(self._entries), "hits": self.hits, "misses": self.misses}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._entries = {_cache_key(k): v for k, v in state["entries"].items()}
        self.hits, self.misses = state["hits"], state["misses"]


def call_fitness(fitness: Callable[..., Any], arch: Any, seed: int, budget: int | None = None) -> FitnessResult:
    """Call `fitness(arch, seed)`, or `fitness(arch, seed, budget)` when a budget is given, and normalise
    its return value."""
    return as_result(fitness(arch, seed) if budget is None else fitness(arch, seed, budget))
