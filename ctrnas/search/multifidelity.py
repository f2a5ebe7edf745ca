"""Multi-fidelity search: regularized evolution whose candidates go through successive halving.

Each batch evolution proposes (the initial population, then each generation's children) is scored at
rung 0, the cheapest fidelity; the best `keep` share of a rung's candidates (at least one) is scored again
at the next rung, and so on up the ladder (Jamieson & Talwalkar 2016; Li et al., Hyperband, 2018). Then
evolution is told the whole batch, each candidate ranked by the highest rung it reached and, within a
rung, by its value there. Values of different rungs are never compared with each other (they may be a
proxy score and a log loss): a candidate that reached rung r+1 beat, at rung r, every candidate of its
batch that stopped there, so it ranks above all candidates that stopped at rung r or lower, in any batch.
A non-finite score at the highest rung reached ranks below everything. `ranker` orders a history the same
way, so the final stage retrains the candidates that went furthest.

Every rung of a batch is one ask/tell step of the runner: rungs are scored in parallel on the executor,
the history records rung and budget, and a checkpoint after every rung makes an interrupted search resume
mid-batch with the same history as an uninterrupted one.

Why not Ray Tune's schedulers: ASHA/HyperBand there promote trials that report after every training
iteration inside a Tune trial loop; our rungs are separate fitnesses (a proxy, an inherited-weight
fine-tuning, a short training from scratch) that report once each, the search must stay deterministic for a
seed and resumable through our own checkpoints, and `search/` may not import Ray. Synchronous successive
halving over one batch is a few dozen lines here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Literal

from ctrnas.errors import RecipeError
from ctrnas.search.evolution import RegularizedEvolution, pareto_front, spread
from ctrnas.search.fitness import FitnessResult, rank_value
from ctrnas.search.history import History, HistoryRecord
from ctrnas.search.runner import Candidate, SearchResult, run_search


@dataclass(frozen=True)
class RungConfig:
    """One fidelity: `fitness` names what scores it (the caller's name, e.g. the CTR pipeline's "proxy"),
    `budget` is in that fitness's own unit (None: its default), `keep` the share promoted to the next rung.
    `fraction` instead of `budget`: a share of the training rows, for fitnesses measured in rows (the caller
    turns it into rows), so one recipe means the same at any data size. `min_steps` with a `fraction`: a floor
    on the rung's size in the fitness's unit (the caller's prefix rungs: steps), for small data where a share
    of the training is too few steps to rank. `extra`: a share of the training each candidate trains beyond
    `budget` (the caller's inherit rung: a child continues its line's weights at `budget` for `extra`)."""

    fitness: str
    budget: int | None = None
    keep: float = 1 / 3
    fraction: float | None = None
    min_steps: int | None = None
    extra: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.keep <= 1:
            raise RecipeError("search.multifidelity.rungs", "keep", f"expected in (0, 1], got {self.keep}")
        if self.budget is not None and self.budget < 0:
            raise RecipeError("search.multifidelity.rungs", "budget", f"expected >= 0 or null, got {self.budget}")
        if self.fraction is not None and not 0 < self.fraction <= 1:
            raise RecipeError("search.multifidelity.rungs", "fraction", f"expected in (0, 1], got {self.fraction}")
        if self.fraction is not None and self.budget is not None:
            raise RecipeError("search.multifidelity.rungs", "fraction", "give budget or fraction, not both")
        if self.min_steps is not None and (self.fraction is None or self.min_steps < 1):
            raise RecipeError("search.multifidelity.rungs", "min_steps",
                              f"a floor (>= 1) on a rung given as a fraction, got {self.min_steps}"
                              + ("" if self.fraction is not None else " without a fraction"))
        if self.extra is not None and not 0 < self.extra <= 1:
            raise RecipeError("search.multifidelity.rungs", "extra", f"expected in (0, 1], got {self.extra}")


@dataclass(frozen=True)
class MultiFidelityConfig:
    """The rungs of `strategy: multifidelity` (regularized evolution with successive halving, see
    `multifidelity`), cheapest first; empty: the caller's default ladder (the CTR pipeline's is in
    `ctrnas.pipeline.fitness.rungs`). Evolution's settings come from `search.evolution`."""

    rungs: tuple[RungConfig, ...] = ()
    # which candidates of a rung go on: "value" (the best `keep` share by the rung's value), "front" (by
    # non-dominated fronts of value and embedding bytes, as MO-ASHA promotes: Schmucker et al., 2021; the last
    # front taken in part keeps its ends and members spread between them by bytes), "auto" ("front" when
    # search.evolution.objective is front: by value alone the cheap rungs drop every small model, since
    # narrow tables learn more slowly at first)
    promotion: Literal["auto", "value", "front"] = "auto"

    def __post_init__(self) -> None:
        if self.promotion not in ("auto", "value", "front"):
            raise RecipeError("search.multifidelity", "promotion",
                              f"expected auto, value or front, got {self.promotion!r}")


def survivors(n: int, keeps: list[float]) -> list[int]:
    """How many of a batch of n are scored at each rung: n, then ceil(keep * previous), at least 1."""
    out = [n]
    for keep in keeps:
        out.append(max(1, math.ceil(keep * out[-1] - 1e-9)))
    return out


def ladder_rank(rung: int | None, value: float, maximize: list[bool]) -> tuple[int, float]:
    """(rung reached, rank at that rung), higher is better; non-finite ranks below every rung."""
    r = rung or 0
    v = rank_value(value, maximize[r])
    return (-1, -math.inf) if not math.isfinite(v) else (r, v)


class MultiFidelity:
    """Successive halving over the batches of a `RegularizedEvolution` (see the module docstring).

    `rungs` give each rung's budget and promotion share; `maximize[r]` says whether rung r's fitness is
    maximized. Candidates carry `rung` and `budget`, so the fitness must take a `fidelity.Fidelity`
    (`fidelity.Ladder` builds one from a fitness per rung).
    """

    def __init__(self, evolution: RegularizedEvolution, rungs: tuple[RungConfig, ...], maximize: list[bool],
                 promotion: str = "auto"):
        if not rungs:
            raise RecipeError("search.multifidelity", "rungs", "expected at least one rung")
        if len(maximize) != len(rungs):
            raise ValueError(f"{len(rungs)} rungs but {len(maximize)} directions")
        self.evolution, self.rungs, self.rung_maximize = evolution, tuple(rungs), list(maximize)
        front = evolution.config.objective == "front"
        self.promotion = ("front" if front else "value") if promotion == "auto" else promotion
        if self.promotion == "front" and not evolution.constraints.counts_bytes:
            raise RecipeError("search.multifidelity", "promotion", "'front' needs the archs' embedding bytes: a "
                              "count_bytes counter (the pipeline gives one)")
        self.seed = evolution.seed
        self.maximize = self.rung_maximize[-1]
        keeps = [r.keep for r in self.rungs[:-1]]
        cfg = evolution.config
        self.total_evaluations = sum(survivors(cfg.population_size, keeps)) + \
            cfg.generations * sum(survivors(cfg.children_per_generation, keeps))
        self._keeps = keeps
        self.batch: list[Candidate] | None = None  # the batch in flight
        self.rung = 0
        self.alive: list[int] = []  # positions in `batch` scored at `rung`
        self.reached: dict[int, tuple[int, FitnessResult]] = {}  # position -> (highest rung, its result)
        self._pending: list[Candidate] | None = None

    @property
    def done(self) -> bool:
        return self.batch is None and self.evolution.done

    def ask(self) -> list[Candidate]:
        if self._pending is not None:
            raise RuntimeError("ask() called twice without tell()")
        if self.batch is None:
            self.batch, self.rung, self.reached = self.evolution.ask(), 0, {}
            self.alive = list(range(len(self.batch)))
        budget = self.rungs[self.rung].budget
        self._pending = [Candidate(c.arch, c.key, c.generation, c.params, c.flops, c.parent_key, budget, self.rung)
                         for c in (self.batch[i] for i in self.alive)]
        return self._pending

    def tell(self, candidates: list[Candidate], results: list[FitnessResult]) -> None:
        if self._pending is None or [c.key for c in candidates] != [c.key for c in self._pending]:
            raise RuntimeError("tell() must receive exactly the candidates of the last ask()")
        if len(results) != len(candidates):
            raise ValueError(f"tell() got {len(results)} results for {len(candidates)} candidates")
        self._pending = None
        self.evolution.observe(candidates, results, self.rung)  # the predictor learns from every rung
        for pos, result in zip(self.alive, results):
            self.reached[pos] = (self.rung, result)
        if self.rung + 1 < len(self.rungs):
            n_next = survivors(len(self.alive), [self._keeps[self.rung]])[1]
            maximize = self.rung_maximize[self.rung]
            # ties go to the earlier proposal; a non-finite score is never promoted
            order = sorted(zip(self.alive, results), key=lambda t: (-rank_value(t[1].value, maximize), t[0]))
            if self.promotion == "front":
                order = self._by_fronts(order, maximize, n_next)
            promoted = sorted(pos for pos, r in order[:n_next] if r.finite)
            if promoted:
                self.rung, self.alive = self.rung + 1, promoted
                return
        batch, self.batch = self.batch, None
        assert batch is not None  # tell() follows the ask() that set it
        outcome = [self.reached[i] for i in range(len(batch))]
        self.evolution.tell(batch, [r for _, r in outcome],
                            ranks=[ladder_rank(rung, r.value, self.rung_maximize) for rung, r in outcome])

    def ranker(self, history: History, k: int) -> list[HistoryRecord]:
        """The k best distinct candidates: each by its highest-rung record, ranked as evolution ranks them."""
        top: dict[str, HistoryRecord] = {}
        for r in history:
            if r.key not in top or (r.rung or 0) > (top[r.key].rung or 0):
                top[r.key] = r
        ranked = sorted(top.values(), key=lambda r: (tuple(-x for x in ladder_rank(r.rung, r.value,
                                                                                   self.rung_maximize)), r.index))
        return ranked[:k]

    def _by_fronts(self, order: list[tuple[int, FitnessResult]], maximize: bool,
                   n: int) -> list[tuple[int, FitnessResult]]:
        """`order` (positions with results, best value first) re-ordered for promotion by non-dominated fronts
        of (value, embedding bytes); the front that does not fit whole keeps its ends and members spread
        between them by bytes (the rule evolution's population keeps its front by)."""
        nbytes, batch = self.evolution.constraints.embedding_bytes, self.batch
        assert batch is not None  # called from tell(), within a batch
        left = [SimpleNamespace(item=t, rank=rank_value(t[1].value, maximize), bytes=nbytes(batch[t[0]].arch))
                for t in order if t[1].finite]
        out: list[tuple[int, FitnessResult]] = []
        while left and len(out) < n:
            front = sorted((left[i] for i in pareto_front(left)), key=lambda p: (p.bytes, -p.rank))
            front = spread(front, n - len(out))
            out += [p.item for p in front]
            left = [p for p in left if all(p is not q for q in front)]
        return out + [t for t in order if all(t is not q for q in out)]

    def fingerprint(self) -> dict[str, Any]:
        fp = {"evolution": self.evolution.fingerprint(),
              "rungs": [[r.fitness, r.budget, r.keep] + ([r.extra] if r.extra is not None else [])
                        for r in self.rungs], "maximize": self.rung_maximize}
        if self.promotion == "front":  # a search from before this rule (or with value) is another search
            fp["promotion"] = "front"
        return fp

    def state_dict(self) -> dict[str, Any]:
        return {"evolution": self.evolution.state_dict(), "batch": self.batch, "rung": self.rung,
                "alive": list(self.alive), "reached": dict(self.reached),
                "evolution_pending": self.evolution._pending}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.evolution.load_state_dict(state["evolution"])
        self.evolution._pending = state["evolution_pending"]
        self.batch, self.rung = state["batch"], state["rung"]
        self.alive, self.reached = list(state["alive"]), dict(state["reached"])
        self._pending = None

    def run(self, fitness: Callable[..., Any], **options: Any) -> SearchResult:
        """Search to the end with `runner.run_search` (workers, execution, checkpoint_path, progress)."""
        return run_search(self, fitness, **options)


def ladder_agreement(history: History, maximize: list[bool]) -> list[dict[str, Any]]:
    """The ladder's self-check: Kendall's tau between consecutive rungs' values, over the candidates scored
    at both (each rung's values turned so that higher is better, so tau > 0 means rung r+1 agrees with the
    order rung r promoted by). A tau near 0 or below says the cheap rung cannot be trusted on this data."""
    from ctrnas.search.predictor import kendall_tau

    by_rung: dict[int, dict[str, float]] = {}
    for r in history:
        if r.rung is not None:
            v = rank_value(r.value, maximize[r.rung])
            by_rung.setdefault(r.rung, {})[r.key] = v
    out = []
    for lo in sorted(by_rung):
        if lo + 1 not in by_rung:
            continue
        keys = [k for k in by_rung[lo + 1] if k in by_rung[lo]]
        a, b = [by_rung[lo][k] for k in keys], [by_rung[lo + 1][k] for k in keys]
        out.append({"from": lo, "to": lo + 1, "n": len(keys), "tau": kendall_tau(a, b)})
    return out
