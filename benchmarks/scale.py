"""Scale-out benchmark: candidate scoring on serial / 2 local processes / Ray (2 CPUs), and the
training step time of 1 vs 2 DMP ranks (gloo on CPU), for benchmarks/RESULTS.md.

    .venv/bin/python benchmarks/scale.py                  # both parts (a few minutes on 2 shared cores)
    .venv/bin/python benchmarks/scale.py --parts scoring --candidates 32
    .venv/bin/python benchmarks/scale.py --report-only    # rebuild the section from saved JSON

Saves benchmarks/out/scale/<part>.json and writes benchmarks/sections/scale.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks/out/scale"

import _results  # noqa: E402  (benchmarks/ is the script folder, first on sys.path)
SECTION = ROOT / "benchmarks/sections/scale.md"


EXPECTATIONS = """**Reading these numbers.** The processes share 2 CPU cores with other jobs, so the tables measure
overheads and check correctness, not scaling, and they move from run to run (the process pool and Ray run the
same 2 single-threaded workers: a gap between them is contention at that moment, not the backend). What holds:
every backend returns the serial scores exactly, and 2 gloo ranks reproduce the 1-process loss trajectory,
metrics, gathered checkpoint and resumed run to float rounding (`tests/distributed/`). Worker startup (spawn,
ship the supernet, import torchrec in each worker) is paid once per search. 2 table-wise ranks split the dense
work (half the batch each) and the lookups (half the tables each), which shows only when the second core is
free; row-wise makes every rank touch every table and reduce-scatter every pooled embedding, which costs more
than it saves at this size on loopback. On GPUs sharding is first a capacity feature: each GPU holds about 1/N
of the embedding rows and their optimizer state."""


def _save(name: str, obj) -> None:
    _results.save(OUT, name, obj)


def _load(name: str):
    return _results.load(OUT, name)


def _random_rows_and_supernet(dense: int, cards: tuple[int, ...], n: int):
    """n random rows of a toy schema and a seeded nasrec-small supernet over it."""
    import numpy as np
    import torch

    from ctrnas.train.batches import TensorRows
    from ctrnas.supernet import Supernet
    from ctrnas.supernet.testing import make_schema

    schema = make_schema(dense, cards)
    rng = np.random.default_rng(0)
    rows = TensorRows(torch.as_tensor(rng.normal(size=(n, dense)), dtype=torch.float32),
                      torch.as_tensor(np.stack([rng.integers(0, c, n) for c in cards], 1)),
                      torch.as_tensor(rng.integers(0, 2, n), dtype=torch.float32), tuple(schema.sparse_names))
    torch.manual_seed(0)
    return rows, Supernet(schema, "nasrec-small")


def scoring(args) -> dict:
    """Seconds to score the same candidates with each backend; startup (workers + first job) apart."""
    import numpy as np
    import torch

    from ctrnas.execution import ExecutionConfig
    from ctrnas.pipeline.fitness.ctr_fitness import ProxyFitness
    from ctrnas.search.fitness import candidate_seed
    from ctrnas.search.parallel import Scorer
    from ctrnas.space import get_space

    torch.set_num_threads(1)
    rows, supernet = _random_rows_and_supernet(4, (1000,) * 8, 4096)
    fitness = ProxyFitness(supernet, args.proxy, None, rows, batch_size=256, num_batches=2)
    space = get_space("nasrec-small")
    srng = np.random.default_rng(1)
    jobs = [(space.sample(srng), candidate_seed(0, i)) for i in range(args.candidates + 2)]
    out = {"proxy": args.proxy, "candidates": args.candidates, "space": "nasrec-small", "backends": {},
           "loadavg_1min": os.getloadavg()[0]}
    reference = None
    for name in ("serial", "processes", "ray"):
        if name == "ray":
            try:
                import ray  # noqa: F401
            except ImportError:
                out["backends"]["ray"] = {"skipped": "ray not installed (pip install 'ctrnas[ray]')"}
                continue
        t0 = time.perf_counter()
        with Scorer(fitness, 2, execution=ExecutionConfig(name, 2)) as backend:
            backend.score(jobs[:2])  # starts the workers and pays their first-job imports
            startup = time.perf_counter() - t0
            t1 = time.perf_counter()
            results = backend.score(jobs[2:])
            steady = time.perf_counter() - t1
        values = [r.value for r, _ in results]
        reference = reference or values
        out["backends"][name] = {"startup_s": startup, "score_s": steady, "cand_per_s": args.candidates / steady,
                                 "identical_to_serial": values == reference,
                                 "job_s_mean": sum(sec for _, sec in results) / len(results)}
        print(f"{name}: startup {startup:.1f} s, {args.candidates / steady:.2f} candidates/s, "
              f"{out['backends'][name]['job_s_mean']:.2f} s per candidate inside a worker", flush=True)
    return out


def big_tables(args) -> dict:
    """Seconds per inherited-weight proxy score with full-size tables: the subnet sharing the supernet's
    tables (now) vs a per-candidate copy of them (before), interleaved in one process."""
    import numpy as np
    import torch

    from ctrnas.pipeline.fitness.ctr_fitness import ProxyFitness
    from ctrnas.search.fitness import candidate_seed
    from ctrnas.space import get_space
    from ctrnas.supernet import export

    class CopyingFitness(ProxyFitness):  # the behaviour before: every candidate copies the tables
        def model(self, arch, seed):
            return export(self.supernet, arch, init=self.init, seed=seed)

    torch.set_num_threads(1)
    rows, supernet = _random_rows_and_supernet(13, (args.table_rows,) * args.tables, 1024)
    shared = ProxyFitness(supernet, args.proxy, None, rows, batch_size=512, num_batches=2)
    copying = CopyingFitness(supernet, args.proxy, None, rows, batch_size=512, num_batches=2)
    space = get_space("nasrec-small")
    srng = np.random.default_rng(1)
    t = {"shared": [], "copy": []}
    same = True
    for i in range(args.candidates):
        arch, seed = space.sample(srng), candidate_seed(0, i)
        vals = {}
        for name, fit in (("shared", shared), ("copy", copying)) if i % 2 else (("copy", copying), ("shared", shared)):
            t0 = time.perf_counter()
            vals[name] = fit(arch, seed).value
            t[name].append(time.perf_counter() - t0)
        same = same and vals["shared"] == vals["copy"]
    gb = sum(p.numel() for p in supernet.stem.parameters()) * 4 / 2**30
    out = {"proxy": args.proxy, "tables": args.tables, "table_rows": args.table_rows, "table_gib": gb,
           "candidates": args.candidates, "shared_s": float(np.median(t["shared"])),
           "copy_s": float(np.median(t["copy"])), "identical": same, "loadavg_1min": os.getloadavg()[0]}
    print(f"{gb:.2f} GiB of tables: shared {out['shared_s']:.2f} s, copied {out['copy_s']:.2f} s per candidate "
          f"(median of {args.candidates}); same scores: {same}", flush=True)
    return out


def step_time(args) -> dict:
    """Median training-step seconds: plain 1-process trainer, and DMP on 1 and 2 ranks."""
    import numpy as np
    import torch

    from ctrnas.distributed.launch import spawn
    from ctrnas.distributed.testing import step_time_ranks, toy_config, toy_data, toy_model
    from ctrnas.train.trainer import Trainer

    torch.set_num_threads(1)
    cards = (args.table_rows,) * args.tables
    schema, data = toy_data(args.batch * (args.steps + 2), args.batch, cards=cards)
    trainer = Trainer(toy_model(schema), toy_config(batch_size=args.batch))
    times = []
    for b in data.batches():
        t0 = time.perf_counter()
        trainer.train_step(b, len(data))
        times.append(time.perf_counter() - t0)
    out = {"tables": args.tables, "table_rows": args.table_rows, "dim": 8, "global_batch": args.batch,
           "model": "dlrm", "plain_1proc_s": float(np.median(times[2:])), "dmp": [],
           "loadavg_1min": os.getloadavg()[0]}
    print(f"plain trainer: {out['plain_1proc_s'] * 1e3:.1f} ms/step", flush=True)
    for world, sharding in ((1, "table_wise"), (2, "table_wise"), (2, "row_wise")):
        with tempfile.TemporaryDirectory() as tmp:
            spawn(step_time_ranks, world, args.steps, args.batch, cards, sharding, f"{tmp}/r.pt")
            r = torch.load(f"{tmp}/r.pt", weights_only=False)
        out["dmp"].append({"ranks": world, "sharding": sharding, "step_s": r["step_s"]})
        print(f"DMP {world} rank(s) {sharding}: {r['step_s'] * 1e3:.1f} ms/step", flush=True)
    return out


def report() -> str:
    sc, st, bt = _load("scoring"), _load("step_time"), _load("big_tables")
    lines = ["## Scale-out: scoring backends and sharded training", "",
             f"{platform.machine()}, {os.cpu_count()} CPU cores (shared with other jobs), no GPU, torch threads 1 "
             "per process; `benchmarks/scale.py`.", ""]
    def command(part: dict) -> list[str]:
        """The command that measured the part, printed above its table."""
        return [f"Command: `{part['command']}`", ""] if "command" in part else []

    if sc:
        lines += command(sc)
        load = f"; 1-min load average {sc['loadavg_1min']:.1f} at the start" if "loadavg_1min" in sc else ""
        lines += [f"**Candidate scoring** ({sc['candidates']} nasrec-small subnets, proxy `{sc['proxy']}` on 2 "
                  f"batches of 256; 2 workers for processes and Ray{load}):", "",
                  "| backend | startup (s) | candidates/s after startup | s per candidate in a worker | same scores as serial |",
                  "|---|---|---|---|---|"]
        for name, r in sc["backends"].items():
            if "skipped" in r:
                lines.append(f"| {name} | – | {r['skipped']} | – | – |")
            else:
                lines.append(f"| {name} | {r['startup_s']:.1f} | {r['cand_per_s']:.2f} | "
                             f"{r.get('job_s_mean', float('nan')):.2f} | {'yes' if r['identical_to_serial'] else 'NO'} |")
        lines.append("")
    if bt:
        lines += command(bt)
        lines += [f"**Scoring with full-size tables** ({bt['tables']} tables x {bt['table_rows']:,} rows x dim 16 = "
                  f"{bt['table_gib']:.2f} GiB, nasrec-small, proxy `{bt['proxy']}` on 2 batches of 512, inherited "
                  f"weights, 1 process, median of {bt['candidates']} candidates, the two ways interleaved; 1-min "
                  f"load average {bt['loadavg_1min']:.1f}):", "",
                  "| subnet tables | s per candidate | ratio |", "|---|---|---|",
                  f"| copied per candidate | {bt['copy_s']:.2f} | 1.00 |",
                  f"| shared with the supernet (what the search does) | {bt['shared_s']:.2f} | "
                  f"{bt['shared_s'] / bt['copy_s']:.2f} |",
                  "", f"Same scores both ways: {'yes' if bt['identical'] else 'NO'}.", ""]
    if st:
        lines += command(st)
        lines += [f"**Training step** (DLRM, {st['tables']} tables x {st['table_rows']:,} rows x dim {st['dim']}, "
                  f"global batch {st['global_batch']}, fused EXACT_ADAGRAD tables, median of the timed steps"
                  + (f"; 1-min load average {st['loadavg_1min']:.1f}" if "loadavg_1min" in st else "") + "):", "",
                  "| setup | ms/step | samples/s |", "|---|---|---|",
                  f"| plain 1-process trainer (sparse torch Adagrad) | {st['plain_1proc_s'] * 1e3:.1f} | "
                  f"{st['global_batch'] / st['plain_1proc_s']:.0f} |"]
        for r in st["dmp"]:
            lines.append(f"| DMP {r['ranks']} rank(s), {r['sharding']} (gloo) | {r['step_s'] * 1e3:.1f} | "
                         f"{st['global_batch'] / r['step_s']:.0f} |")
        lines.append("")
    lines.append(EXPECTATIONS)
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="scoring,step_time")
    ap.add_argument("--candidates", type=int, default=24)
    ap.add_argument("--proxy", default="sigeo")
    ap.add_argument("--tables", type=int, default=26)
    ap.add_argument("--table-rows", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    if not args.report_only:
        for part in args.parts.split(","):
            result = {"scoring": scoring, "step_time": step_time, "big_tables": big_tables}[part](args)
            _save(part, {**result, "command": " ".join([".venv/bin/python benchmarks/scale.py",
                                                         *map(shlex.quote, sys.argv[1:])])})
    text = report()
    _results._atomic_write(SECTION, text)
    print(text)


if __name__ == "__main__":
    main()
