"""The correlation harness split over worker processes: one device, many small networks.

An NB201 network at batch 64 is a few hundred small kernels per pass, so one process keeps a GPU mostly
idle waiting for Python to launch them; several processes on one GPU overlap that time (and several CPU
cores work at once on a CPU-only machine). Worker i scores the cells at positions i, i + n, ... of the
seeded sample into its own CSV beside the main one; at the end the rows are merged into the main CSV
(atomically) and the worker CSVs removed. A run stopped half-way leaves the worker CSVs, which the next
run (any number of workers) counts as done and merges.
"""

from __future__ import annotations

import csv
from pathlib import Path

import torch

from ctrnas.errors import CtrnasError
from ctrnas.files import atomic_path
from ctrnas.vision.correlate import COLUMNS, CorrelateConfig, read_rows, run_correlation
from ctrnas.vision.space import NB201Table


def shard_csvs(csv_path: Path) -> list[Path]:
    """Worker CSVs left beside `csv_path` by this or an earlier run."""
    return sorted(csv_path.parent.glob(f"{csv_path.stem}.worker*.csv"))


def merge_shards(csv_path: str | Path) -> Path:
    """Append the worker CSVs' rows to `csv_path` (first row of each (cell, level, proxy) wins), atomically,
    then remove the worker CSVs."""
    csv_path = Path(csv_path)
    parts = shard_csvs(csv_path)
    if not parts:
        return csv_path
    rows, seen = [], set()
    for path in [csv_path, *parts]:
        for r in read_rows(path):
            key = (r["arch"], float(r["warmup"]), r["proxy"])
            if key not in seen:
                seen.add(key)
                rows.append(r)
    with atomic_path(csv_path) as tmp, tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    for path in parts:
        path.unlink()
    return csv_path


def _load_inputs(inputs: str) -> dict:
    """A worker's context: the images, labels and table, read once from the inputs file."""
    from ctrnas.safeload import load_weights_file

    saved = load_weights_file(inputs, "correlation inputs")
    return {"images": saved["images"], "labels": saved["labels"],
            "table": NB201Table(saved["table_path"], saved["table_rows"])}


def _score_shard(context: dict, job: tuple) -> str | None:
    """Score shard `index` of `count` into its worker CSV; the error's one line if it failed (so the other
    shards still finish and are merged, as a re-run would need them)."""
    config, csv_path, index, count, device, time_limit_s, state_dir = job
    path = Path(csv_path)
    others = [path, *(p for p in shard_csvs(path) if p.name != f"{path.stem}.worker{index}.csv")]
    try:
        run_correlation(config, context["images"], context["labels"], context["table"],
                        path.with_name(f"{path.stem}.worker{index}.csv"), progress=index == 0,
                        time_limit_s=time_limit_s, state_dir=state_dir, done_csvs=tuple(others), device=device,
                        shard=(index, count))
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


def run_sharded(
    config: CorrelateConfig, images: torch.Tensor, labels: torch.Tensor, table: NB201Table,
    csv_path: str | Path, workers: int, device: str = "cpu", time_limit_s: float | None = None,
    state_dir: str | Path | None = None, threads: int = 1,
) -> Path:
    """`run_correlation` over `workers` spawned processes (`ctrnas.execution`) on `device` (a setting string,
    resolved in each worker); returns the merged CSV. Worker 0 shows the progress bar of its share."""
    from ctrnas.execution import ExecutionConfig, make_executor

    csv_path = Path(csv_path)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    if workers < 1:
        raise CtrnasError(f"vision correlate: workers must be >= 1, got {workers}")
    if workers == 1:
        run_correlation(config, images, labels, table, csv_path, time_limit_s=time_limit_s, state_dir=state_dir,
                        done_csvs=tuple(shard_csvs(csv_path)), device=device)
        return merge_shards(csv_path)
    # The inputs go through a file that each worker reads (its state is the file's name): no large tensors on
    # the pipes, and no shared-memory segment is needed. A weights-only torch file (tensors and plain
    # values), never a pickle: see ctrnas.safeload.
    inputs = csv_path.with_name(f".{csv_path.stem}.inputs.pt")
    with atomic_path(inputs) as tmp:
        torch.save({"images": images.contiguous(), "labels": labels.contiguous(), "table_path": table.path,
                    "table_rows": table.rows}, tmp)
    jobs = [(config, str(csv_path), i, workers, str(device), time_limit_s, state_dir) for i in range(workers)]
    try:
        with make_executor(ExecutionConfig("processes", workers), _score_shard, state=str(inputs),
                           setup=_load_inputs, threads=threads, name="correlate worker") as ex:
            errors = ex.map(jobs)
    finally:
        inputs.unlink(missing_ok=True)
        merge_shards(csv_path)  # what the workers wrote is kept even when one of them failed or died
    failed = {i: e for i, e in enumerate(errors) if e is not None}
    if failed:
        raise CtrnasError(f"vision correlate: worker(s) {sorted(failed)} failed ("
                          + "; ".join(f"{i}: {e}" for i, e in failed.items())
                          + "); re-run the same command to finish")
    return csv_path
