"""Random search: the baseline every strategy must beat with the same number of evaluations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ctrnas.config import to_dict
from ctrnas.errors import RecipeError
from ctrnas.search.constraints import Constraints, propose
from ctrnas.search.fitness import FitnessResult
from ctrnas.search.runner import Candidate, SearchResult, run_search
from ctrnas.search.space_protocol import SearchSpace


@dataclass(frozen=True)
class RandomSearchConfig:
    """budget defaults to evolution's 128 + 240 * 8 evaluations; batch_size is how many are scored
    (possibly in parallel) between checkpoints, and is the `generation` number's unit in the history."""

    budget: int = 2048
    batch_size: int = 8
    max_dedup_tries: int = 100
    maximize: bool = True

    def __post_init__(self) -> None:
        for name in ("budget", "batch_size", "max_dedup_tries"):
            if getattr(self, name) < 1:
                raise RecipeError("RandomSearchConfig", name, f"expected >= 1, got {getattr(self, name)}")


class RandomSearch:
    """Distinct (when the space allows) random architectures within the budgets, as an ask/tell strategy."""

    def __init__(
        self,
        space: SearchSpace,
        config: RandomSearchConfig = RandomSearchConfig(),
        *,
        seed: int = 0,
        constraints: Constraints | None = None,
    ):
        self.space, self.config, self.seed = space, config, int(seed)
        self.constraints = constraints if constraints is not None else Constraints()
        self.maximize = config.maximize
        self.total_evaluations = config.budget
        self.rng = np.random.default_rng(self.seed)
        self.evaluated = 0
        self.batch = 0
        self._seen: set[str] = set()
        self._pending: list[Candidate] | None = None

    @property
    def done(self) -> bool:
        return self.evaluated >= self.config.budget

    def ask(self) -> list[Candidate]:
        if self._pending is not None:
            raise RuntimeError("ask() called twice without tell()")
        n = min(self.config.batch_size, self.config.budget - self.evaluated)
        out = []
        for _ in range(n):
            p = propose(
                lambda: self.space.sample(self.rng), self.space, self.rng, self.constraints,
                self._seen.__contains__, self.config.max_dedup_tries,
            )
            self._seen.add(p.key)
            out.append(Candidate(p.arch, p.key, self.batch, p.params, p.flops))
        self._pending = out
        return out

    def tell(self, candidates: list[Candidate], results: list[FitnessResult]) -> None:
        if self._pending is None or [c.key for c in candidates] != [c.key for c in self._pending]:
            raise RuntimeError("tell() must receive exactly the candidates of the last ask()")
        if len(results) != len(candidates):
            raise ValueError(f"tell() got {len(results)} results for {len(candidates)} candidates")
        self.evaluated += len(candidates)
        self.batch += 1
        self._pending = None

    def fingerprint(self) -> dict[str, Any]:
        return {"config": to_dict(self.config), "seed": self.seed, "constraints": to_dict(self.constraints.config)}

    def state_dict(self) -> dict[str, Any]:
        return {"evaluated": self.evaluated, "batch": self.batch, "seen": set(self._seen),
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.evaluated, self.batch = state["evaluated"], state["batch"]
        self._seen, self._pending = set(state["seen"]), None
        self.rng.bit_generator.state = state["rng"]

    def run(self, fitness: Callable[..., Any], **options: Any) -> SearchResult:
        return run_search(self, fitness, **options)
