"""Run a search strategy with its candidates scored on any `ScoringBackend` (serial, processes, Ray).

The backend is passed to `ctrnas.search.runner.run_search` as its scorer, so history, cache and
checkpoints are those of a local run and a checkpoint written by one resumes in the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ctrnas.distributed.backends import ScoringBackend
from ctrnas.search.fitness import ScoreCache
from ctrnas.search.runner import SearchResult, Strategy, run_search
from ctrnas.search.space_protocol import default_to_json


def run_search_on(backend: ScoringBackend, strategy: Strategy, fitness: Callable, *,
                  cache: ScoreCache | None = None, to_json: Callable[[Any], Any] = default_to_json,
                  checkpoint_path: str | Path | None = None, progress: bool = False) -> SearchResult:
    """`run_search(strategy, fitness)` with scoring on `backend` (which the caller owns and closes)."""
    return run_search(strategy, fitness, scorer=backend, cache=cache, to_json=to_json,
                      checkpoint_path=checkpoint_path, progress=progress)
