"""Regularized (aging) evolution, Real et al. 2019, with the NASRec/SiGeo settings as defaults.

Per generation (NASRec `searcher.py`, SiGeo App. F.3): sample a tournament of `tournament_size` from the
population, take its best as the parent, make `children_per_generation` children by mutating the parent,
score them, append them to the population and remove the same number of the *oldest* members, so the
population stays at `population_size` and every architecture dies of age, however good it is.
Defaults: population 128, 240 generations, tournament 64, 8 children -> 128 + 240 * 8 = 2048 evaluations.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal

import numpy as np

from ctrnas.config import to_dict
from ctrnas.errors import RecipeError
from ctrnas.search.constraints import Constraints, propose
from ctrnas.search.fitness import FitnessResult, rank_value
from ctrnas.search.runner import Candidate, SearchResult, run_search
from ctrnas.search.space_protocol import SearchSpace, arch_key

if TYPE_CHECKING:
    from ctrnas.search.predictor import Predictor


@dataclass(frozen=True)
class EvolutionConfig:
    """Every number of the search; the defaults are NASRec's `run_ea` scripts (used unchanged by SiGeo).

    mutation_period: None gives NASRec's max(20, generations // 5) (see `mutations_at`).
    parent_per_child: False = one tournament and parent per generation (NASRec); True = one tournament
      per child (Real et al.'s one-child cycles, batched).
    maximize: True for proxy scores (higher is better), False for a validation log loss.
    """

    population_size: int = 128
    generations: int = 240
    tournament_size: int = 64
    children_per_generation: int = 8
    mutation_period: int | None = None
    parent_per_child: bool = False
    max_dedup_tries: int = 100
    maximize: bool = True
    # the `elitism` best members never die of age (the oldest others die instead): with aging alone the
    # seeded archs, the oldest, leave the population after one generation however good they are
    elitism: int = 0
    # share of children made by a small step of the space's `mutate_local` (a width, depth or rank one
    # step, FM on/off) instead of `mutate`'s re-draw of any choice; 0 = NASRec's mutation only
    local_share: float = 0.0
    # "value": parents and survivors by score alone. "front": by score and embedding bytes together (the
    # search is asked for a Pareto front): a tournament's parent is drawn from its members that no
    # other member beats on both, and the population's front never dies of age (see `pareto_front`)
    objective: Literal["value", "front"] = "value"
    # every child is an untried one-step local edit of its parent (`local_neighbours`, the whole neighbourhood
    # drawn without replacement; picked by the predictor when it is fitted): the search tries the edits of
    # the best arch instead of drawing the same few again (docs/results.md, "What one edit of a seed can
    # reach"). When the parents' neighbourhoods are used up, children are mutants as before.
    local_sweep: bool = False
    # > 0: each generation's parent is the best arch of one of the `lineages` best lines (a line: a seed or
    # random draw and all its descendants), in turn, instead of a tournament's winner; the final stage then
    # retrains the best of each of those lines (`History.best_of_lines`; a top_k beyond `lineages` takes the
    # next best of any line: two edits of one line within a rung's noise both get a full training). A short
    # rung ranks edits of one model well but not two model families that learn at different speeds
    # (docs/results.md: DLRM's line led DeepFM's at 40% of the training and ended behind it), so the search
    # keeps refining more than one family and lets the full training choose.
    lineages: int = 0
    # with `lineages`, `local_sweep` and a fitted predictor: each generation's children are the best edits, by
    # the predictor's acquisition, of all the lines' bests together instead of one line's in turn, so a line
    # far behind gets no children unless an edit is predicted to make up the gap (lines take turns until the
    # predictor is fitted). Meant for the predictor's `relative` mode, whose prediction is the parent's score
    # plus the edit's predicted change.
    lines_by_predictor: bool = False
    # every arch the search tries has the blocks of one of its seeds (`initial`): children move the
    # embedding widths alone (the space's `mutate_widths` / `width_neighbours`), and the first population
    # is filled with width mutants of the seeds instead of random draws. The second step of "structure
    # first, widths second" (docs/embedding-search.md): a short rung cannot then drop the structure found by
    # the first step for another family that learns faster early on.
    widths_only: bool = False

    def __post_init__(self) -> None:
        for name in ("population_size", "tournament_size", "children_per_generation", "max_dedup_tries"):
            if getattr(self, name) < 1:
                raise RecipeError("EvolutionConfig", name, f"expected >= 1, got {getattr(self, name)}")
        if self.generations < 0:
            raise RecipeError("EvolutionConfig", "generations", f"expected >= 0, got {self.generations}")
        if self.tournament_size > self.population_size:
            raise RecipeError(
                "EvolutionConfig", "tournament_size",
                f"{self.tournament_size} exceeds population_size {self.population_size}",
            )
        if not 0 <= self.elitism < self.population_size:
            raise RecipeError("EvolutionConfig", "elitism",
                              f"expected 0 <= elitism < population_size {self.population_size}, got {self.elitism}")
        if self.objective not in ("value", "front"):
            raise RecipeError("EvolutionConfig", "objective", f"expected 'value' or 'front', got {self.objective!r}")
        if self.lineages < 0:
            raise RecipeError("EvolutionConfig", "lineages", f"expected >= 0, got {self.lineages}")
        if self.lines_by_predictor and not (self.lineages and self.local_sweep):
            raise RecipeError("EvolutionConfig", "lines_by_predictor", "needs lineages > 0 and local_sweep: true")
        if not 0.0 <= self.local_share <= 1.0:
            raise RecipeError("EvolutionConfig", "local_share", f"expected in [0, 1], got {self.local_share}")
        if self.mutation_period is not None and self.mutation_period < 1:
            raise RecipeError("EvolutionConfig", "mutation_period", f"expected >= 1 or null, got {self.mutation_period}")


def mutations_at(generation: int, config: EvolutionConfig) -> int:
    """Mutations per child in evolved generation `generation` (1-based; 0 is the random initial population).

    NASRec: (G - g) // max(20, G // 5) + 1 with g = generation - 1, so with G = 240 (period 48) the
    first generation applies 6 mutations, then 5, 4, 3, 2 and 1 over the last 48: explore broadly
    early, refine late. With G < 20 it is always 1.
    """
    period = config.mutation_period or max(20, config.generations // 5)
    return (config.generations - (generation - 1)) // period + 1


@dataclass(frozen=True)
class _Member:
    arch: Any
    key: str
    rank: Any  # rank_value (higher is better, non-finite is -inf), or the caller's comparable rank
    bytes: float = math.nan  # embedding bytes (objective "front" only)


def spread(items: list[Any], room: int) -> list[Any]:
    """`room` of `items` (sorted by bytes): both ends and the others evenly spaced between them, how a front that
    does not fit whole is kept (evolution's population, a rung's promotion under the front objective)."""
    if len(items) <= room:
        return list(items)
    return [items[round(k * (len(items) - 1) / max(room - 1, 1))] for k in range(room)]


def pareto_front(members: list[Any]) -> list[int]:
    """Indices of the members no other member dominates: at least as good a rank (higher is better) and
    at most as many bytes, better in one of the two (NSGA-II's first front)."""
    def dominates(a: Any, b: Any) -> bool:
        return bool(a.rank >= b.rank and a.bytes <= b.bytes and (a.rank > b.rank or a.bytes < b.bytes))

    return [i for i, m in enumerate(members) if not any(dominates(o, m) for o in members if o is not m)]


class RegularizedEvolution:
    """Aging evolution as an ask/tell strategy; `run(fitness)` drives it with `runner.run_search`."""

    def __init__(
        self,
        space: SearchSpace,
        config: EvolutionConfig = EvolutionConfig(),
        *,
        seed: int = 0,
        constraints: Constraints | None = None,
        initial: tuple[Any, ...] = (),
        predictor: Predictor | None = None,
    ) -> None:
        self.space, self.config, self.seed = space, config, int(seed)
        # a `search.predictor.Predictor` (or None): picks which of `pool` mutants per child get scored
        self.predictor = predictor
        self.constraints = constraints if constraints is not None else Constraints()
        if config.objective == "front" and not self.constraints.counts_bytes:
            raise RecipeError("EvolutionConfig", "objective", "'front' needs the archs' embedding bytes: a "
                              "count_bytes counter (the pipeline gives one)")
        # archs the initial population starts with (e.g. the space's hand-designed baselines), so the
        # search has to beat what a user would have built; the rest of it is sampled
        self.initial = tuple(initial)
        if config.widths_only and not (self.initial and hasattr(space, "mutate_widths")):
            raise RecipeError("EvolutionConfig", "widths_only", "needs seeds (search.seeds) in a space that searches "
                              "embedding widths (space.table_dims): the widths are searched around the seeds' blocks")
        self.maximize = config.maximize
        self.total_evaluations = config.population_size + config.generations * config.children_per_generation
        self.rng = np.random.default_rng(self.seed)
        self.generation = 0  # the next generation to ask for; 0 = initial random population
        self.population: list[_Member] = []  # oldest first
        self._seen: set[str] = set()
        self._pending: list[Candidate] | None = None
        # `lineages`: the root (seed or random draw) of every scored arch, and each root's best member so far
        self._roots: dict[str, str] = {}
        self._line_best: dict[str, _Member] = {}

    @property
    def done(self) -> bool:
        return self.generation > self.config.generations

    def _propose(self, draw: Callable[[], Any], remutate: Callable[[Any], Any] | None = None,
                 parent_key: str = "") -> Candidate:
        p = propose(draw, self.space, self.rng, self.constraints, self._seen.__contains__,
                    self.config.max_dedup_tries, remutate)
        self._seen.add(p.key)
        return Candidate(p.arch, p.key, self.generation, p.params, p.flops, parent_key)

    def _tournament_parent(self) -> _Member:
        idx = self.rng.choice(len(self.population), size=self.config.tournament_size, replace=False)
        if self.config.objective == "front":  # any member of the tournament's own front
            sample: list[_Member] = [self.population[i] for i in idx]
            front = pareto_front(sample)
            return sample[front[int(self.rng.integers(len(front)))]]
        # Ties go to the younger member (larger index), which keeps the population moving.
        return self.population[max(idx, key=lambda i: (self.population[i].rank, i))]

    def _line_bests(self) -> list[_Member]:
        """The best members of the `lineages` best lines, best first (ties: the younger line)."""
        order = list(self._line_best)  # roots in the order their lines began
        ranked = sorted(range(len(order)), key=lambda i: (self._line_best[order[i]].rank, i), reverse=True)
        return [self._line_best[order[i]] for i in ranked[: self.config.lineages]]

    def _line_parent(self) -> _Member:
        """The best member of the lines' bests ranked `(generation - 1) % lineages`."""
        lines = self._line_bests()
        return lines[(self.generation - 1) % len(lines)]

    def _mutant(self, arch: Any, n: int) -> Any:
        if self.config.widths_only:
            for _ in range(n):
                arch = self.space.mutate_widths(arch, self.rng)  # type: ignore[attr-defined]
            return arch
        mutate = self.space.mutate
        # drawn only when asked for, so a search without local moves keeps NASRec's random stream
        if self.config.local_share > 0 and hasattr(self.space, "mutate_local") and \
                self.rng.random() < self.config.local_share:
            mutate = self.space.mutate_local
        for _ in range(n):
            arch = mutate(arch, self.rng)
        return arch

    def _children(self, parents: list[_Member], n: int) -> list[Candidate]:
        """One child per parent; with a predictor, `pool` mutants per child are proposed and the predictor
        picks which are scored (until it has enough scores to fit, the first of each parent's are kept)."""
        # one step, whatever NASRec's schedule of mutations per child says for this generation
        if self.config.local_sweep and (swept := self._sweep(parents)) is not None:
            return swept
        pool = self.predictor.config.pool if self.predictor is not None else 0
        if pool < 2:
            return [self._propose(functools.partial(self._mutant, p.arch, n), lambda a: self._mutant(a, n), p.key)
                    for p in parents]
        proposals: list[Candidate] = []
        taken = set(self._seen)

        def remutate(arch: Any) -> Any:
            return self._mutant(arch, n)

        for p in parents:
            def draw(p: _Member = p) -> Any:
                return self._mutant(p.arch, n)

            for _ in range(pool):
                c = propose(draw, self.space, self.rng, self.constraints, taken.__contains__,
                            self.config.max_dedup_tries, remutate)
                taken.add(c.key)
                proposals.append(Candidate(c.arch, c.key, self.generation, c.params, c.flops, p.key))
        assert self.predictor is not None  # pool >= 2 comes from it
        chosen = self.predictor.choose([(c.key, c.arch) for c in proposals], len(parents),
                                       [c.parent_key for c in proposals])
        if chosen is None:
            chosen = [i * pool for i in range(len(parents))]  # each parent's first mutant
        out = [proposals[i] for i in sorted(chosen)]
        self._seen.update(c.key for c in out)
        return out

    def _sweep(self, parents: list[_Member], k: int | None = None, turn: _Member | None = None
               ) -> list[Candidate] | None:
        """`k` children (default: one per parent) from the parents' untried one-step local edits, picked by
        the predictor when it is fitted, else at random without replacement (from `turn`'s edits only when it
        is given and has enough); None when fewer are left than children wanted."""
        neighbours = getattr(self.space, "width_neighbours" if self.config.widths_only else "local_neighbours", None)
        if neighbours is None:
            return None
        options: list[Candidate] = []
        taken = set(self._seen)
        for p in {p.key: p for p in parents}.values():
            for arch in neighbours(p.arch):
                key = arch_key(arch)
                if key in taken or not self.constraints.satisfied(arch):
                    continue
                taken.add(key)
                params, flops = self.constraints.measure(arch)
                options.append(Candidate(arch, key, self.generation, params, flops, p.key))
        k = k or len(parents)
        if len(options) < k:
            return None
        chosen = None if self.predictor is None else self.predictor.choose(
            [(c.key, c.arch) for c in options], k, [c.parent_key for c in options])
        if chosen is None:
            mine = [i for i, c in enumerate(options) if turn is not None and c.parent_key == turn.key]
            pick = mine if len(mine) >= k else list(range(len(options)))
            chosen = [pick[int(i)] for i in self.rng.choice(len(pick), size=k, replace=False)]
        out = [options[i] for i in sorted(chosen)]
        self._seen.update(c.key for c in out)
        return out

    def observe(self, candidates: list[Candidate], results: list[FitnessResult], rung: int | None = None) -> None:
        """Give the predictor (if any) the scores of `candidates` at `rung` (a multi-fidelity caller reports
        every rung; `tell` without `ranks` reports its own)."""
        if self.predictor is not None:
            for c, r in zip(candidates, results):
                self.predictor.observe(c.key, c.arch, rung, r.value, c.parent_key)

    def _seeded(self) -> list[Candidate]:
        """The `initial` archs that fit the constraints, without repeats, as generation-0 candidates."""
        out = []
        for arch in self.initial:
            key = arch_key(arch)
            if key in self._seen or not self.constraints.satisfied(arch):
                continue
            self._seen.add(key)
            params, flops = self.constraints.measure(arch)
            out.append(Candidate(arch, key, 0, params, flops))
        return out

    def _width_draw(self) -> Any:
        """A seed (drawn at random) with one to three width moves: `widths_only`'s stand-in for a random draw."""
        arch = self.initial[int(self.rng.integers(len(self.initial)))]
        return self._mutant(arch, 1 + int(self.rng.integers(3)))

    def ask(self) -> list[Candidate]:
        """The initial population (generation 0) or the children of the next generation."""
        if self._pending is not None:
            raise RuntimeError("ask() called twice without tell()")
        if self.done:
            raise RuntimeError("the search is finished")
        cfg = self.config
        if self.generation == 0:
            out = self._seeded()[: cfg.population_size]
            draw = self._width_draw if cfg.widths_only else (lambda: self.space.sample(self.rng))
            out += [self._propose(draw) for _ in range(cfg.population_size - len(out))]
        else:
            n = mutations_at(self.generation, cfg)
            parent: _Member | None = None
            if cfg.lineages:
                parent = self._line_parent()
            elif not cfg.parent_per_child:
                parent = self._tournament_parent()
            parents = [self._tournament_parent() if parent is None else parent
                       for _ in range(cfg.children_per_generation)]
            swept = self._sweep(self._line_bests(), cfg.children_per_generation, parent) \
                if cfg.lines_by_predictor else None
            out = swept if swept is not None else self._children(parents, n)
        self._pending = out
        return out

    def tell(self, candidates: list[Candidate], results: list[FitnessResult], ranks: list[Any] | None = None) -> None:
        """Add the scored candidates as the youngest members; after generation 0 the oldest as many die.

        `ranks` (higher is better, any mutually comparable values) replaces the ranking of `results` by
        value, for a caller that ranks by more than one number (`multifidelity`: rung reached, then value);
        such a caller reports the values to the predictor itself (`observe`). With `elitism`, the best
        members are spared and the oldest of the others die."""
        if self._pending is None or [c.key for c in candidates] != [c.key for c in self._pending]:
            raise RuntimeError("tell() must receive exactly the candidates of the last ask()")
        if len(results) != len(candidates):
            raise ValueError(f"tell() got {len(results)} results for {len(candidates)} candidates")
        if ranks is None:
            self.observe(candidates, results)
            ranks = [rank_value(r.value, self.maximize) for r in results]
        for c, rank in zip(candidates, ranks):
            root = self._roots.setdefault(c.key, self._roots.get(c.parent_key, c.key) if c.parent_key else c.key)
            best = self._line_best.get(root)
            if best is None or rank >= best.rank:  # ties go to the younger member
                self._line_best[root] = _Member(c.arch, c.key, rank)
        front = self.config.objective == "front"
        self.population += [_Member(c.arch, c.key, rank, self.constraints.embedding_bytes(c.arch) if front else math.nan)
                            for c, rank in zip(candidates, ranks)]
        if self.generation > 0:
            pop = self.population
            # ties among the best go to the younger member, as in the tournament
            elite = set(sorted(range(len(pop)), key=lambda i: (pop[i].rank, i), reverse=True)[: self.config.elitism])
            if front:  # the front survives too (the oldest of the others die); a front larger than the
                # population keeps both ends and members evenly spread between them by bytes
                ends = sorted(pareto_front(pop), key=lambda i: (pop[i].bytes, i))
                ends = spread(ends, self.config.population_size)
                elite |= set(ends)
            dying = [i for i in range(len(pop)) if i not in elite][: len(candidates)]
            self.population = [m for i, m in enumerate(pop) if i not in set(dying)]
        self.generation += 1
        self._pending = None

    def fingerprint(self) -> dict[str, Any]:
        config = to_dict(self.config)
        # a search from before these options resumes
        for name in ("local_sweep", "lineages", "lines_by_predictor", "widths_only"):
            if not getattr(self.config, name):
                config.pop(name)
        fp = {"config": config, "seed": self.seed, "constraints": to_dict(self.constraints.config)}
        if self.initial:
            fp["initial"] = [arch_key(a) for a in self.initial]
        if self.predictor is not None:
            predictor = to_dict(self.predictor.config)
            if not self.predictor.config.relative:  # a search from before the option resumes
                predictor.pop("relative")
            fp["predictor"] = predictor
        return fp

    def state_dict(self) -> dict[str, Any]:
        return {
            "generation": self.generation, "population": list(self.population), "seen": set(self._seen),
            "rng": self.rng.bit_generator.state, "roots": dict(self._roots), "line_best": dict(self._line_best),
            **({"predictor": self.predictor.state_dict()} if self.predictor is not None else {}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generation, self.population = state["generation"], list(state["population"])
        self._seen, self._pending = set(state["seen"]), None
        self.rng.bit_generator.state = state["rng"]
        self._roots, self._line_best = dict(state.get("roots", {})), dict(state.get("line_best", {}))
        if self.predictor is not None and "predictor" in state:
            self.predictor.load_state_dict(state["predictor"])

    def run(self, fitness: Callable[..., Any], **options: Any) -> SearchResult:
        """Search to the end (see `runner.run_search` for workers, cache, checkpoint_path, progress)."""
        return run_search(self, fitness, **options)
