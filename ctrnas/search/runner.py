"""The ask/tell loop shared by every strategy: cache, parallel scoring, history, checkpoints.

A strategy only proposes (`ask`) and learns (`tell`); this driver owns everything that must be the same
for all strategies, so evolution and random search get resume and parallel scoring for free.
"""

from __future__ import annotations

import contextlib
import sys

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from ctrnas.execution import ExecutionConfig
from ctrnas.search.fidelity import Fidelity
from ctrnas.search.checkpoint import load_checkpoint, save_checkpoint
from ctrnas.search.fitness import FitnessResult, ScoreCache, candidate_seed, default_budget, warn_non_finite
from ctrnas.search.history import History, HistoryRecord
from ctrnas.search.parallel import Scorer
from ctrnas.search.space_protocol import default_to_json


@dataclass(frozen=True)
class Candidate:
    """A proposed architecture with its key, the generation that proposed it, its resource counts and
    the key of the parent it was mutated from ("" for a random sample). `budget` is what its scoring may
    spend (see `fitness`); None takes the search's budget, so a single-fidelity strategy never sets it."""

    arch: Any
    key: str
    generation: int
    params: float = math.nan
    flops: float = math.nan
    parent_key: str = ""
    budget: int | None = None
    rung: int | None = None  # a multi-fidelity search's rung; the fitness then gets Fidelity(rung, budget)


class Strategy(Protocol):
    """What `run_search` needs from a strategy (see `evolution.RegularizedEvolution`): ask for a batch of
    candidates, get their results, until done; its state round-trips through a checkpoint.

    Example::

        while not strategy.done:
            batch = strategy.ask()                      # list[Candidate], each with arch, key, generation
            strategy.tell(batch, [fitness(c.arch, seed) for c in batch])
    """

    seed: int
    maximize: bool  # True: higher results are better
    total_evaluations: int  # the candidates it will ask for in all (for progress)

    @property
    def done(self) -> bool:
        """True once it asks for no more candidates."""
        ...

    def ask(self) -> list[Candidate]:
        """Returns:
            The next batch of candidates (scored together, possibly in parallel); `tell` must follow.
        """
        ...

    def tell(self, candidates: list[Candidate], results: list[FitnessResult]) -> None:
        """Args:
            candidates: exactly the batch of the last `ask`.
            results: one FitnessResult per candidate, in the same order.
        """
        ...

    def fingerprint(self) -> dict[str, Any]:
        """Its settings as JSON-able data: a checkpoint resumes only a strategy with the same fingerprint."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue (RNG included), picklable."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state_dict()`: the rest of the search equals an uninterrupted one."""
        ...


@dataclass
class SearchResult:
    """The outcome of a search: the full history and how to read it (which direction is better)."""

    history: History
    maximize: bool
    cache: ScoreCache
    # how a strategy whose values are not comparable with each other ranks its history (multi-fidelity:
    # by rung reached, then value): ranker(history, k) -> the k best distinct candidates
    ranker: Callable[[History, int], list[HistoryRecord]] | None = None

    @property
    def best(self) -> HistoryRecord | None:
        top = self.top_k(1)
        return top[0] if top else None

    def top_k(self, k: int) -> list[HistoryRecord]:
        """The k best distinct candidates, e.g. the 15 NASRec retrains from scratch."""
        if self.ranker is not None:
            return self.ranker(self.history, k)
        return self.history.top_k(k, self.maximize)


def _score_batch(
    candidates: list[Candidate], start_index: int, seed: int, cache: ScoreCache, scorer: Scorer,
    budget: int | None = None,
) -> list[tuple[FitnessResult, float, int, bool, int | None]]:
    """(result, seconds, seed, cached, budget) per candidate; each distinct uncached (key, budget) is scored once."""
    seeds = [candidate_seed(seed, start_index + i) for i in range(len(candidates))]
    given = [c.budget if c.budget is not None else budget for c in candidates]
    budgets: list[Any] = [b if c.rung is None else Fidelity(c.rung, b, c.parent_key)
                          for c, b in zip(candidates, given)]
    seen: set[tuple[Any, ...]] = set()
    jobs, job_pos = [], []
    known: dict[tuple[Any, ...], FitnessResult] = {}
    for i, c in enumerate(candidates):
        k = (c.key, budgets[i])
        if k in seen:
            continue
        seen.add(k)
        hit = cache.get(*k)
        if hit is not None:
            known[k] = hit
        else:
            # a job without a budget keeps the two-argument call of a fitness that takes none
            jobs.append((c.arch, seeds[i]) if budgets[i] is None else (c.arch, seeds[i], budgets[i]))
            job_pos.append(i)
    # the costliest first (FLOPs a row times the rows), so no long training starts last beside idle workers
    costs = [candidates[i].flops * (given[i] or 1) for i in job_pos]
    scored = dict(zip(job_pos, scorer.score(jobs, costs)))
    for i, (result, _) in scored.items():
        k = (candidates[i].key, budgets[i])
        cache.put(k[0], result, k[1])
        known[k] = result
    out = []
    for i, c in enumerate(candidates):
        if i in scored:
            out.append((scored[i][0], scored[i][1], seeds[i], False, budgets[i]))
        else:
            # A cache hit (or a repeat within this batch) reuses the earlier score and costs no time.
            out.append((known[(c.key, budgets[i])], 0.0, seeds[i], True, budgets[i]))
    return out


def run_search(
    strategy: Strategy,
    fitness: Callable[..., Any],
    *,
    workers: int = 1,
    cache: ScoreCache | None = None,
    to_json: Callable[[Any], Any] = default_to_json,
    checkpoint_path: str | Path | None = None,
    progress: bool = False,
    scorer_options: dict[str, Any] | None = None,
    scorer: Scorer | None = None,
    budget: int | None = None,
    execution: ExecutionConfig | None = None,
) -> SearchResult:
    """Run `strategy` to completion, scoring with `fitness(arch, seed[, budget])`; resume from
    `checkpoint_path` if it exists.

    `scorer` is an already-open scoring backend (e.g. a `parallel.Scorer`, owned and closed by the
    caller); by default a `Scorer` on `execution` (a `ctrnas.execution.ExecutionConfig`; None: `workers`
    local processes) is opened and closed here. `budget` is what each score may spend, for candidates that
    name none (None: the fitness's `default_budget`); every history record says which budget it got.

    A resumed search replays nothing: it restores the state saved after the last finished generation and
    continues, and ends with the same history as an uninterrupted run (timings aside).
    """
    from tqdm import tqdm

    cache = cache if cache is not None else ScoreCache()
    history = History()
    fingerprint = {"strategy": type(strategy).__name__, **strategy.fingerprint()}
    if budget is not None:  # an explicit budget; a fitness's default is fingerprinted with the fitness
        fingerprint["budget"] = budget
    if checkpoint_path is not None and Path(checkpoint_path).exists():
        space = getattr(strategy, "space", None) or getattr(getattr(strategy, "evolution", None), "space", None)
        state = load_checkpoint(checkpoint_path, fingerprint, {type(strategy).__module__, type(space).__module__})
        strategy.load_state_dict(state["strategy"])
        history = History(state["history"])
        cache.load_state_dict(state["cache"])
        if (unbudgeted := default_budget(fitness)) is not None:
            cache.adopt_unbudgeted(unbudgeted)
        print(resumed_line(strategy, len(history), checkpoint_path), file=sys.stderr)

    own = scorer is None
    if scorer is None:
        scorer = Scorer(fitness, workers, execution=execution, **(scorer_options or {}))
    budget = budget if budget is not None else default_budget(fitness)
    count_bytes = _bytes_counter(strategy)
    with (scorer if own else contextlib.nullcontext(scorer)), tqdm(  # Scorer.__enter__ returns itself
        total=strategy.total_evaluations, initial=len(history), disable=not progress, desc="search", unit="arch"
    ) as bar:
        while not strategy.done:
            candidates = strategy.ask()
            scored = _score_batch(candidates, len(history), strategy.seed, cache, scorer, budget)
            for c, (result, seconds, seed, cached, spent) in zip(candidates, scored):
                index = len(history)
                warn_non_finite(c.key, index, result)
                history.append(
                    HistoryRecord(
                        index=index, generation=c.generation, key=c.key, arch=to_json(c.arch), value=result.value,
                        terms=dict(result.terms), meta=dict(result.meta), params=c.params, flops=c.flops,
                        time_s=seconds, seed=seed, cached=cached, parent_key=c.parent_key,
                        budget=spent.budget if isinstance(spent, Fidelity) else spent, rung=c.rung,
                        embedding_bytes=count_bytes(c.arch),
                    )
                )
            strategy.tell(candidates, [s[0] for s in scored])
            bar.update(len(candidates))
            if checkpoint_path is not None:
                save_checkpoint(
                    checkpoint_path,
                    {"fingerprint": fingerprint, "strategy": strategy.state_dict(),
                     "history": list(history), "cache": cache.state_dict()},
                )
    return SearchResult(history, strategy.maximize, cache, getattr(strategy, "ranker", None))


def _bytes_counter(strategy: Strategy) -> Callable[[Any], float]:
    """The strategy's embedding-bytes count of an arch (its constraints' counter), NaN without one."""
    cons = getattr(strategy, "constraints", None) or getattr(getattr(strategy, "evolution", None), "constraints", None)
    if cons is None or not getattr(cons, "counts_bytes", False):
        return lambda arch: math.nan
    return cons.embedding_bytes  # type: ignore[no-any-return]


def resumed_line(strategy: Strategy, evaluations: int, path: str | Path) -> str:
    """What a search resumed from its checkpoint had done, in one line (generations where it has them)."""
    done = f"{evaluations} of {strategy.total_evaluations} evaluations done"
    generations = getattr(getattr(strategy, "config", None), "generations", None)
    if strategy.done:
        return f"search: resumed from {path}: already finished ({done})"
    if generations is not None and hasattr(strategy, "generation"):
        return f"search: resumed from {path}: generation {strategy.generation} of {generations} next ({done})"
    return f"search: resumed from {path}: {done}"
