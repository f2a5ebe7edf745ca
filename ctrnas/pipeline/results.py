"""Typed results of each pipeline stage (what `ctrnas.api` returns)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctrnas.data.schema import DatasetSchema


@dataclass(frozen=True)
class DataResult:
    """The prepared dataset folder; `reused` when an identical folder was already there."""

    path: Path
    schema: DatasetSchema
    meta: dict
    seconds: float = 0.0
    reused: bool = True

    @property
    def bayes_logloss(self) -> dict | None:
        """Per-split Bayes-optimal log loss (synthetic data only)."""
        return self.meta.get("bayes_logloss")


@dataclass(frozen=True)
class WarmupResult:
    """The supernet after warm-up on `rows` training rows (`steps` optimizer steps); `checkpoint` on disk."""

    supernet: Any
    fraction: float
    rows: int
    steps: int
    seconds: float
    checkpoint: Path | None = None
    summary: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SearchStageResult:
    """The search's history (`ctrnas.search.runner.SearchResult`), its fitness kind and where rows came from."""

    result: Any
    fitness: str  # "proxy" or "oneshot"
    fitness_name: str  # the proxy name, or "oneshot"
    maximize: bool
    seconds: float
    rows_note: str = ""
    rung_maximize: tuple[bool, ...] | None = None  # each rung's direction (multi-fidelity search)
    predictor: dict | None = None  # the predictor's report (`ctrnas.search.predictor.Predictor.report`)
    fields: dict | None = None  # the field probe's record (`ctrnas.pipeline.fitness.fields.probe_fields`)

    @property
    def history(self):
        return self.result.history

    def retrained(self, k: int, lineages: int = 0) -> list:
        """The candidates the final stage retrains: the search's k best, or with `search.evolution.lineages`
        the best of each line evolution refined (a short rung cannot rank two model families), then the next
        best of any line while k is not reached."""
        if not lineages:
            return self.result.top_k(k)
        return self.history.best_of_lines(self.result.top_k(len(self.history)), k, lineages)


@dataclass(frozen=True)
class TrainedModel:
    """One model trained from scratch: its label, validation and test metrics, and search facts if any."""

    label: str
    arch: Any | None
    val: dict
    test: dict
    params: float
    flops: float
    seconds: float
    score: float | None = None  # the search fitness of this architecture
    history_index: int | None = None
    diverged: dict | None = None  # {"step", "loss", "reason"} when its training was stopped as diverged
    # set by final-stage selection: "ok", "diverged", "no validation metrics" or "worse than constant"
    status: str = "ok"
    constant_val_logloss: float = math.nan  # the constant predictor's log loss on the same validation rows
    emb_params: float = math.nan  # embedding table parameters (`params` counts the others)


@dataclass(frozen=True)
class FinalResult:
    """The retrained top-k (in search rank order), the best on validation, baselines, and the export folder."""

    candidates: tuple[TrainedModel, ...]
    best: TrainedModel
    baselines: tuple[TrainedModel, ...]
    export_dir: Path | None
    seconds: float
    model: Any = None  # the best trained model (an ExportedModel)
    distributed: dict | None = None  # world size, backend and sharding when trained on N ranks
    # set when no retrained candidate was usable: the one-line message; `best` is then a baseline (arch None)
    fallback: str | None = None
    # {label: step} of the top-k that continued the search's prefix-rung training instead of starting over
    continued: dict = field(default_factory=dict)
    # {"rank N (shipped name)": baseline} of the top-k left out as the same model as a baseline the stage
    # trains (`ctrnas.pipeline.final.twins`)
    twins: dict = field(default_factory=dict)
    # the export against its rival over training seeds (`ctrnas.pipeline.final.verdict`); None: not measured
    verdict: dict | None = None
    # where the winner came from and its margins (`ctrnas.pipeline.origin`); its "line" leads every report
    origin: dict | None = None


@dataclass(frozen=True)
class RunResult:
    """A whole run: every stage's result, wall time per stage, and the report folder."""

    output_dir: Path
    data: DataResult
    warmup: WarmupResult
    search: SearchStageResult
    final: FinalResult
    timings: dict[str, float]
    metrics: dict

    @property
    def test_logloss(self) -> float:
        return self.final.best.test["logloss"]

    @property
    def test_auc(self) -> float:
        return self.final.best.test["auc"]


@dataclass(frozen=True)
class CompareResult:
    """Runs of the same recipe at several warm-up fractions; `table` rows are ready to print."""

    runs: dict[str, RunResult]
    table: list[dict]
    output_dir: Path


@dataclass(frozen=True)
class StudyResult:
    """The proxy-ranking study: per-arch trained metrics, proxy scores per fraction, and correlations."""

    archs: list
    test_logloss: list[float]
    scores: dict[str, dict[str, list[float]]]  # fraction label -> proxy -> score per arch
    correlations: list[dict]  # rows: fraction, proxy, kendall, low, high, spearman, low, high, n
    output_dir: Path
    seconds: dict[str, float] = field(default_factory=dict)
    features: list[dict] = field(default_factory=list)  # rows: feature, target, spearman, p, n (what follows what)
