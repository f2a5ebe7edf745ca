"""How long a run's trainings take on N workers when handed out in job order or costliest first, from the
seconds the run recorded for each (a run on an idle box: each worker's job ran alone on its core).

    python benchmarks/demo_schedule.py runs/demo [--workers 2]

Search: each batch (a generation's rung) is a barrier, the next starts when its last job ends; the cost is
FLOPs a row times the rows, as the runner orders them. Final stage: the top-k and the baselines, costed by
their dense weights, as the stage orders them. The verdict (two trainings on two workers) does not depend on
the order. Lower bound: the batch's job seconds spread evenly over the workers.
"""

from __future__ import annotations

import argparse
import heapq
import json
from pathlib import Path


def makespan(times: list[float], order, workers: int) -> float:
    """Seconds until the last job ends when `order` hands jobs to whichever worker is free first."""
    free = [0.0] * workers
    for i in order:
        heapq.heappush(free, heapq.heappop(free) + times[i])
    return max(free) if times else 0.0


def costliest_first(costs: list[float]) -> list[int]:
    """Job indices by decreasing cost, ties in job order (as `Executor.imap_costliest_first`)."""
    return sorted(range(len(costs)), key=lambda i: (-costs[i], i))


def stage(batches: list[tuple[list[float], list[float]]], workers: int) -> dict[str, float]:
    """{job order, costliest first, bound} summed over barriers; each batch is (seconds, costs) per job."""
    out = {"job order": 0.0, "costliest first": 0.0, "bound": 0.0}
    for times, costs in batches:
        out["job order"] += makespan(times, range(len(times)), workers)
        out["costliest first"] += makespan(times, costliest_first(costs), workers)
        out["bound"] += max(sum(times) / workers, max(times, default=0.0))
    return out


def run_batches(run: Path) -> dict[str, list[tuple[list[float], list[float]]]]:
    """The search's batches and the final stage's one batch, with each job's recorded seconds and cost."""
    history = json.loads((run / "search" / "history.json").read_text())
    search: dict[tuple[int, object], tuple[list[float], list[float]]] = {}
    for r in history:
        times, costs = search.setdefault((r["generation"], r.get("rung")), ([], []))
        times.append(0.0 if r.get("cached") else float(r["time_s"]))
        costs.append(float(r["flops"]) * float(r.get("budget") or 1))
    metrics = json.loads((run / "metrics.json").read_text())
    models = metrics["candidates"] + metrics["baselines"]
    final = ([float(m["train_seconds"]) for m in models], [float(m["params"]) for m in models])
    return {"search": [search[k] for k in sorted(search, key=str)], "final stage": [final]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a run's folder (search/history.json, metrics.json)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    print(f"Wall seconds on {args.workers} workers, from the job seconds recorded in {args.run}:\n")
    print("| stage | job order | costliest first | bound |\n|---|---:|---:|---:|")
    for name, batches in run_batches(Path(args.run)).items():
        s = stage(batches, args.workers)
        print(f"| {name} | {s['job order']:.1f} | {s['costliest first']:.1f} | {s['bound']:.1f} |")


if __name__ == "__main__":
    main()
