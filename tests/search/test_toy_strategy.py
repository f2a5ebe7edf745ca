"""A search strategy declared in one file (here, this test) runs through the runner like the built-in ones:
the extension point of docs/architecture.md, using only `ctrnas.search`. Registered (`search.strategies`),
a recipe, `make_strategy` and the vision harness's `--strategy` take it by name."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from ctrnas.errors import RecipeError
from ctrnas.search import strategies
from ctrnas.search.build import SearchConfig, build_strategy, make_strategy
from ctrnas.search.runner import Candidate, run_search

from tests.helpers.toy_search import IntVector, IntVectorSpace, SeparableFitness


class Exhaustive:
    """Every architecture of a small IntVectorSpace, `per_batch` at a time, in lexicographic order."""

    maximize = True

    def __init__(self, space: IntVectorSpace, per_batch: int = 5, seed: int = 0):
        self.all = [IntVector(v) for v in itertools.product(range(space.choices), repeat=space.length)]
        self.per_batch, self.seed, self.total_evaluations = per_batch, seed, len(self.all)
        self.next = self.batch = 0

    @property
    def done(self) -> bool:
        return self.next >= len(self.all)

    def ask(self) -> list[Candidate]:
        chunk = self.all[self.next:self.next + self.per_batch]
        return [Candidate(a, a.key(), self.batch) for a in chunk]

    def tell(self, candidates, results) -> None:
        self.next += len(candidates)
        self.batch += 1

    def fingerprint(self) -> dict:
        return {"per_batch": self.per_batch, "seed": self.seed}

    def state_dict(self) -> dict:
        return {"next": self.next, "batch": self.batch}

    def load_state_dict(self, state: dict) -> None:
        self.next, self.batch = state["next"], state["batch"]


def test_a_strategy_in_one_file_runs_through_the_runner_and_finds_the_known_optimum(tmp_path):
    space = IntVectorSpace(length=3, choices=3)
    fitness = SeparableFitness(target=(2, 0, 1))
    result = run_search(Exhaustive(space), fitness, checkpoint_path=tmp_path / "s.ckpt")
    assert len(result.history.records) == 27 == len({r.key for r in result.history.records})
    best = result.top_k(1)[0]
    assert best.key == "2-0-1" and best.value == 0.0
    assert [r.generation for r in result.history.records][::5] == [0, 1, 2, 3, 4, 5]


@dataclass(frozen=True)
class ExhaustiveConfig:
    per_batch: int = 5


@pytest.fixture
def exhaustive(monkeypatch):
    monkeypatch.setattr(strategies, "_STRATEGIES", dict(strategies._STRATEGIES))  # registered for this test only

    def build(space, settings, *, seed, **_):
        return Exhaustive(space, settings("exhaustive").per_batch, seed)

    strategies.register_strategy(strategies.StrategyEntry("exhaustive", ExhaustiveConfig, build))
    return "exhaustive"


def test_a_registered_strategy_is_made_by_name_from_a_search_section_and_without_one(exhaustive, tmp_path):
    space = IntVectorSpace(length=2, choices=3)
    s = make_strategy(SearchConfig(strategy=exhaustive), space, seed=4, maximize=True)
    assert isinstance(s, Exhaustive) and (s.per_batch, s.seed) == (5, 4)  # SearchConfig has no section: defaults
    s = build_strategy(exhaustive, space, seed=1, maximize=True, configs={exhaustive: ExhaustiveConfig(2)})
    assert s.per_batch == 2
    result = run_search(s, SeparableFitness(target=(1, 2)), checkpoint_path=tmp_path / "s.ckpt")
    assert result.top_k(1)[0].key == "1-2" and len(result.history.records) == 9
    with pytest.raises(RecipeError, match="'exhaustive'.*got 'exhaustiv'"):
        SearchConfig(strategy="exhaustiv")


def test_the_recipe_and_the_vision_command_list_a_registered_strategy(exhaustive):
    from ctrnas.cli import build_parser
    from ctrnas.recipe import recipe_from_dict

    recipe = recipe_from_dict({"name": "t", "data": {"path": "d"}, "search": {"strategy": exhaustive}})
    assert recipe.search.strategy == exhaustive
    args = build_parser().parse_args(["vision", "search", "--strategy", exhaustive, "--data", "d", "--table", "t"])
    assert args.strategy == exhaustive
