"""The search history: every evaluated candidate, in evaluation order, with CSV/JSON writers."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from ctrnas.search.fitness import rank_value


@dataclass(frozen=True)
class HistoryRecord:
    """One evaluated candidate. `generation` 0 is the initial population (or the first random batch).

    `time_s` is the wall time of the fitness call (0 for a cache hit); it is the only field that is not
    reproducible between runs, so `HistoryRecord.same_as` ignores it. `budget` is what the score was
    allowed to spend (see `fitness`; None for a fitness that takes no budget), `rung` the fidelity it was
    scored at in a multi-fidelity search.
    """

    index: int
    generation: int
    key: str
    arch: Any
    value: float
    terms: dict[str, float] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    params: float = math.nan
    flops: float = math.nan
    time_s: float = 0.0
    seed: int = 0
    cached: bool = False
    parent_key: str = ""
    budget: int | None = None
    rung: int | None = None  # the rung of a multi-fidelity search (None: single fidelity)
    embedding_bytes: float = math.nan  # its embedding tables' bytes, when the search counts them

    def same_as(self, other: "HistoryRecord") -> bool:
        """Equal in everything but timing (NaN equals NaN)."""
        a = json.dumps(_plain(dataclasses.replace(self, time_s=0.0)), sort_keys=True)
        b = json.dumps(_plain(dataclasses.replace(other, time_s=0.0)), sort_keys=True)
        return a == b


def _json_safe(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, (np.floating, np.integer)):
        return _json_safe(v.item())
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return v


def non_finite_reason(record: HistoryRecord) -> str:
    """Why a candidate's score is NaN/inf ("" when it is finite): the value, its non-finite score terms and
    any error its fitness reported in `meta["error"]`."""
    if math.isfinite(record.value):
        return ""
    bad = [f"{k}={v}" for k, v in record.terms.items() if not math.isfinite(v)]
    why = f"score {record.value}" + (f"; non-finite terms: {', '.join(bad)}" if bad else "")
    return why + (f"; {record.meta['error']}" if record.meta.get("error") else "")


def _plain(record: HistoryRecord) -> dict[str, Any]:
    plain: dict[str, Any] = _json_safe({f.name: getattr(record, f.name) for f in dataclasses.fields(record)})
    return plain


class History:
    """An append-only list of `HistoryRecord`s with ranking helpers."""

    def __init__(self, records: Iterable[HistoryRecord] = ()):
        self.records: list[HistoryRecord] = list(records)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[HistoryRecord]:
        return iter(self.records)

    def __getitem__(self, i: int) -> HistoryRecord:
        return self.records[i]

    def append(self, record: HistoryRecord) -> None:
        if record.index != len(self.records):
            raise ValueError(f"history record index {record.index} != next index {len(self.records)}")
        self.records.append(record)

    def keys(self) -> set[str]:
        return {r.key for r in self.records}

    def top_k(self, k: int, maximize: bool) -> list[HistoryRecord]:
        """The k best distinct architectures; ties go to the earlier evaluation, non-finite scores come last."""
        best: dict[str, HistoryRecord] = {}
        for r in self.records:
            if r.key not in best:
                best[r.key] = r
        ranked = sorted(best.values(), key=lambda r: (-rank_value(r.value, maximize), r.index))
        return ranked[:k]

    def roots(self) -> dict[str, str]:
        """{key: the seed or random draw (a record without parent) its line of children descends from}, in one
        pass (a child is scored after its parent)."""
        out: dict[str, str] = {}
        for r in self.records:
            if r.key not in out:
                out[r.key] = out.get(r.parent_key, r.parent_key) if r.parent_key else r.key
        return out

    def best_of_lines(self, ranked: list[HistoryRecord], k: int, lines: int | None = None) -> list[HistoryRecord]:
        """From `ranked` (best first, distinct archs), the best of each line (`roots`) until k are taken, the
        lines in the order of their bests (only the `lines` best lines, when given); then the next best of any
        line."""
        roots = self.roots()
        bests: dict[str, HistoryRecord] = {}
        for r in ranked:
            bests.setdefault(roots.get(r.key, r.key), r)
        top = list(bests.values())[: k if lines is None else min(k, lines)]
        taken = {r.key for r in top}
        return top + [r for r in ranked if r.key not in taken][: k - len(top)]

    def best(self, maximize: bool) -> HistoryRecord | None:
        top = self.top_k(1, maximize)
        return top[0] if top else None

    def best_so_far(self, maximize: bool) -> np.ndarray:
        """Best finite value after each evaluation (NaN until the first finite one), in the fitness's own sign."""
        out = np.full(len(self.records), math.nan)
        best_rank = -math.inf
        for i, r in enumerate(self.records):
            rv = rank_value(r.value, maximize)
            if rv > best_rank:
                best_rank = rv
            if math.isfinite(best_rank):
                out[i] = best_rank if maximize else -best_rank
        return out

    def same_as(self, other: "History") -> bool:
        return len(self) == len(other) and all(a.same_as(b) for a, b in zip(self, other))

    def to_json(self, path: str | Path) -> None:
        """All records as a JSON list; NaN becomes null and ±inf the strings "inf"/"-inf" (strict JSON)."""
        Path(path).write_text(json.dumps([_plain(r) for r in self.records], indent=1, allow_nan=False))

    @classmethod
    def from_json(cls, path: str | Path) -> "History":
        """Read a file written by `to_json` (null and "inf"/"-inf" become floats again)."""

        def num(v: Any) -> float:
            return math.nan if v is None else float(v)

        from ctrnas.files import read_json

        records = []
        for d in read_json(path, "search history"):
            d["terms"] = {k: num(v) for k, v in d["terms"].items()}
            for name in ("value", "params", "flops", "time_s"):
                d[name] = num(d[name])
            records.append(HistoryRecord(**d))
        return cls(records)

    def to_csv(self, path: str | Path) -> None:
        """One row per candidate; each score term gets a `term_<name>` column, the arch a JSON column."""
        term_names: list[str] = []
        for r in self.records:
            term_names += [t for t in r.terms if t not in term_names]
        base = ["index", "generation", "key", "value", "params", "flops", "embedding_bytes", "time_s", "seed", "cached",
                "parent_key", "budget", "rung"]
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(base + [f"term_{t}" for t in term_names] + ["arch", "meta", "note"])
            for r in self.records:
                row = [getattr(r, name) for name in base]
                row += [r.terms.get(t, "") for t in term_names]
                row += [json.dumps(_json_safe(r.arch), sort_keys=True), json.dumps(_json_safe(r.meta), sort_keys=True),
                        non_finite_reason(r)]
                writer.writerow(row)
