"""A search strategy declared in one file (here, this test) runs through the runner like the built-in ones:
the extension point of docs/architecture.md, using only `ctrnas.search`."""

from __future__ import annotations

import itertools

from ctrnas.search.runner import Candidate, run_search
from ctrnas.search.toy import IntVector, IntVectorSpace, SeparableFitness


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
