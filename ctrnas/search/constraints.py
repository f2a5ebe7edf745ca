"""Resource constraints (max params / max FLOPs via user-supplied counters) and candidate proposal.

Two policies for a candidate that breaks a budget (SiGeo's `s.t. R(a) <= r`):
- reject: throw it away and draw a fresh one (a new random sample, or a new child of the same parent);
- repair: keep mutating it, one choice at a time, until it fits (stays close to what evolution proposed).
Both give up after `max_tries` with a `ConstraintError`, since a budget below the smallest architecture
would otherwise loop forever.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Literal

import numpy as np

from ctrnas.errors import CtrnasError, RecipeError
from ctrnas.search.space_protocol import SearchSpace, arch_key


class ConstraintError(CtrnasError):
    """No candidate satisfying the resource budget was found within the allowed number of tries."""


@dataclass(frozen=True)
class ConstraintConfig:
    """Budgets (None: unbounded) and the policy for candidates that exceed them."""

    max_params: float | None = None
    max_flops: float | None = None
    # embedding tables' bytes (float32; per-table widths, `ctrnas.supernet.embedding_bytes`), e.g. 4e6
    max_embedding_bytes: float | None = None
    mode: Literal["reject", "repair"] = "reject"
    max_tries: int = 100

    def __post_init__(self) -> None:  # checked when the recipe is read, not when the search starts
        if self.max_tries < 1:
            raise RecipeError("constraints", "max_tries", f"expected >= 1, got {self.max_tries}")


class Constraints:
    """Checks budgets with the given counters; counts are cached by arch key (a FLOP count can be costly)."""

    def __init__(
        self,
        config: ConstraintConfig = ConstraintConfig(),
        count_params: Callable[[Any], float] | None = None,
        count_flops: Callable[[Any], float] | None = None,
        count_bytes: Callable[[Any], float] | None = None,
    ):
        if config.max_embedding_bytes is not None and count_bytes is None:
            raise RecipeError("constraints", "max_embedding_bytes", "a memory budget needs a count_bytes counter")
        if config.max_params is not None and count_params is None:
            raise RecipeError("constraints", "max_params", "a parameter budget needs a count_params counter")
        if config.max_flops is not None and count_flops is None:
            raise RecipeError("constraints", "max_flops", "a FLOPs budget needs a count_flops counter")
        if config.mode not in ("reject", "repair"):
            raise RecipeError("constraints", "mode", f"expected 'reject' or 'repair', got {config.mode!r}")
        self.config = config
        self._count_params, self._count_flops, self._count_bytes = count_params, count_flops, count_bytes
        self._counts: dict[str, tuple[float, float]] = {}
        self._bytes: dict[str, float] = {}

    def measure(self, arch: Any) -> tuple[float, float]:
        """(params, FLOPs) of `arch`; NaN where no counter was given."""
        key = arch_key(arch)
        if key not in self._counts:
            params = float(self._count_params(arch)) if self._count_params else math.nan
            flops = float(self._count_flops(arch)) if self._count_flops else math.nan
            self._counts[key] = (params, flops)
        return self._counts[key]

    @property
    def counts_bytes(self) -> bool:
        return self._count_bytes is not None

    def embedding_bytes(self, arch: Any) -> float:
        """Bytes of `arch`'s embedding tables; NaN without a counter."""
        key = arch_key(arch)
        if key not in self._bytes:
            self._bytes[key] = float(self._count_bytes(arch)) if self._count_bytes else math.nan
        return self._bytes[key]

    def satisfied(self, arch: Any) -> bool:
        params, flops = self.measure(arch)
        cfg = self.config
        return ((cfg.max_params is None or params <= cfg.max_params)
                and (cfg.max_flops is None or flops <= cfg.max_flops)
                and (cfg.max_embedding_bytes is None or self.embedding_bytes(arch) <= cfg.max_embedding_bytes))


@dataclass(frozen=True)
class Proposal:
    """A candidate that fits the budgets; `duplicate` when de-duplication gave up (it will hit the cache)."""

    arch: Any
    key: str
    params: float
    flops: float
    duplicate: bool


def propose(
    draw: Callable[[], Any],
    space: SearchSpace,
    rng: np.random.Generator,
    constraints: Constraints,
    is_seen: Callable[[str], bool],
    max_dedup_tries: int,
    remutate: Callable[[Any], Any] | None = None,
) -> Proposal:
    """Draw until a candidate fits the budgets and has an unseen key (NASRec: re-mutate until the hash is new).

    A seen key is replaced by `remutate(arch)` when given (NASRec keeps mutating the rejected child, so
    the retries walk away from a parent whose neighbourhood is used up) and by a fresh `draw()` otherwise.
    After `max_dedup_tries` seen keys a fitting duplicate is accepted, since a nearly exhausted space
    must not stall the search.
    """
    dup_tries = con_tries = 0
    arch = draw()
    while True:
        if not constraints.satisfied(arch):
            con_tries += 1
            if con_tries > constraints.config.max_tries:
                params, flops = constraints.measure(arch)
                raise ConstraintError(
                    f"no architecture within max_params={constraints.config.max_params}, "
                    f"max_flops={constraints.config.max_flops}, max_embedding_bytes="
                    f"{constraints.config.max_embedding_bytes} after {constraints.config.max_tries} tries "
                    f"(mode {constraints.config.mode}; last had params={params}, flops={flops}, embedding bytes="
                    f"{constraints.embedding_bytes(arch)})"
                )
            arch = space.mutate(arch, rng) if constraints.config.mode == "repair" else draw()
            continue
        key = arch_key(arch)
        if not is_seen(key) or dup_tries >= max_dedup_tries:
            params, flops = constraints.measure(arch)
            return Proposal(arch, key, params, flops, duplicate=is_seen(key))
        dup_tries += 1
        arch = remutate(arch) if remutate is not None else draw()
