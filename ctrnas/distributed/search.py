"""Run a search strategy with its candidates scored on any `ScoringBackend` (serial, processes, Ray).

`ctrnas.search.runner.run_search` builds its own local `Scorer`; until it accepts a ready-made one
(`scorer=`, requested from the search owner), this module drives the same ask/score/tell loop with the
same helpers (`_score_batch`, `HistoryRecord`, checkpoints), so its history, cache and checkpoints are
those of `run_search` and a checkpoint written by one resumes in the other.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Callable

from ctrnas.distributed.backends import ScoringBackend
from ctrnas.search.checkpoint import load_checkpoint, save_checkpoint
from ctrnas.search.fitness import ScoreCache, warn_non_finite
from ctrnas.search.history import History, HistoryRecord
from ctrnas.search.runner import SearchResult, Strategy, _score_batch, run_search
from ctrnas.search.space_protocol import default_to_json


def run_search_on(backend: ScoringBackend, strategy: Strategy, fitness: Callable, *,
                  cache: ScoreCache | None = None, to_json: Callable[[Any], Any] = default_to_json,
                  checkpoint_path: str | Path | None = None, progress: bool = False) -> SearchResult:
    """`run_search(strategy, fitness)` with scoring on `backend` (which the caller owns and closes).

    `fitness` is only used for the fingerprint-free parts of the contract; the backend already holds it.
    """
    if "scorer" in inspect.signature(run_search).parameters:
        return run_search(strategy, fitness, scorer=backend, cache=cache, to_json=to_json,
                          checkpoint_path=checkpoint_path, progress=progress)
    from tqdm import tqdm

    cache = cache if cache is not None else ScoreCache()
    history = History()
    fingerprint = {"strategy": type(strategy).__name__, **strategy.fingerprint()}
    if checkpoint_path is not None and Path(checkpoint_path).exists():
        state = load_checkpoint(checkpoint_path, fingerprint)
        strategy.load_state_dict(state["strategy"])
        history = History(state["history"])
        cache.load_state_dict(state["cache"])
    with tqdm(total=strategy.total_evaluations, initial=len(history), disable=not progress, desc="search",
              unit="arch") as bar:
        while not strategy.done:
            candidates = strategy.ask()
            scored = _score_batch(candidates, len(history), strategy.seed, cache, backend)
            for c, (result, seconds, seed, cached) in zip(candidates, scored):
                index = len(history)
                warn_non_finite(c.key, index, result)
                history.append(HistoryRecord(
                    index=index, generation=c.generation, key=c.key, arch=to_json(c.arch), value=result.value,
                    terms=dict(result.terms), meta=dict(result.meta), params=c.params, flops=c.flops,
                    time_s=seconds, seed=seed, cached=cached, parent_key=c.parent_key))
            strategy.tell(candidates, [s[0] for s in scored])
            bar.update(len(candidates))
            if checkpoint_path is not None:
                save_checkpoint(checkpoint_path, {"fingerprint": fingerprint, "strategy": strategy.state_dict(),
                                                  "history": list(history), "cache": cache.state_dict()})
    return SearchResult(history, strategy.maximize, cache)
