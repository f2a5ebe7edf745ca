"""Report of the NB201 run on a GPU (benchmarks/nb201_gpu.sh): rank correlations at zero-shot and at every
warm-up level, the paired warm-up rises, and timings, next to SiGeo Tables 2-3.

    .venv/bin/python benchmarks/nb201_gpu_report.py [--csv benchmarks/results/nb201_gpu_scores.csv.gz]

Writes its text into benchmarks/sections/nb201.md between the markers `<!-- gpu -->` and `<!-- /gpu -->`
(appended the first time).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.nb201 import PAPER, SECTION, TABLE  # noqa: E402

CSV = ROOT / "benchmarks/results/nb201_gpu_scores.csv.gz"
LEVELS = [0.0, 0.1, 0.2, 0.4, 1.25]
ZERO = ["sigeo", "zico", "naswot", "synflow", "params", "sigeo.zico", "sigeo.fr"]
WARM = ["sigeo", "zico", "sigeo@1,1,1", "sigeo.zico", "sigeo.fr", "sigeo.loss", "synflow", "naswot"]
PAPER_GPU = {**PAPER, **{("naswot", w): v for (m, w), v in PAPER.items() if m == "nwot"}}
PAPER_GPU.update({("zico", 0.1): (0.78, 0.58), ("zico", 0.2): (0.77, 0.57), ("zico", 0.4): (0.78, 0.58)})


def read(path: Path) -> list[dict]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return list(csv.DictReader(io.StringIO(raw.decode())))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", default=str(CSV))
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from ctrnas.vision.correlate import format_markdown, metric_values, summarize
    from ctrnas.vision.space import NB201Cell, NB201Table
    from ctrnas.vision.stats import spearman_difference

    table = NB201Table.load(TABLE)
    rows = read(Path(args.csv))
    levels: dict[str, set] = {}
    for r in rows:
        if r["proxy"] == "sigeo":
            levels.setdefault((r.get("run", "1"), r["arch"]), set()).add(float(r["warmup"]))
    all_levels: dict[str, set] = {}
    for (run, a), ls in levels.items():
        all_levels.setdefault(a, set()).update(ls)
    paired = {a for a, ls in all_levels.items() if set(LEVELS) <= ls}  # zero-shot rows come from the latest run
    latest = max(run for run, _ in levels)
    this_run = {a for (run, a), ls in levels.items() if run == latest and set(LEVELS) <= ls}
    zero = summarize(rows, table, ZERO, [0.0], n_boot=args.n_boot, seed=args.seed)
    warm_latest = [s for m in WARM for s in summarize(rows, table, [m], LEVELS, archs=this_run,
                                                       subset=f"run {latest}", n_boot=args.n_boot, seed=args.seed)]
    warm = [s for m in ["sigeo", "zico", "synflow"] for s in summarize(
        rows, table, [m], LEVELS, archs=paired, subset="both runs", n_boot=args.n_boot, seed=args.seed)]
    keys = sorted(this_run)
    acc = [table.accuracy(NB201Cell.from_str(k)) for k in keys]

    def vals(metric, w):
        v = metric_values(rows, metric, w)
        return [v[k] for k in keys]

    rise = ["| comparison (Δ Spearman ρ, same cells) | warm-up | Δρ [95% CI] | share of resamples > 0 |",
            "|---|---|---|---|"]
    for a, b, same_level in [("sigeo", "sigeo", False), ("zico", "zico", False), ("sigeo", "zico", True),
                             ("sigeo", "sigeo.zico", True)]:
        for w in LEVELS[1:] if not same_level else LEVELS:
            d, (lo, hi), share = spearman_difference(vals(a, w), vals(b, w if same_level else 0.0), acc,
                                                     args.n_boot, args.seed)
            what = f"{a} − {b}" if same_level else f"{a} at {w:g} − {a} at 0"
            rise.append(f"| {what} | {w:g} | {d:+.3f} [{lo:+.3f}, {hi:+.3f}] | {share:.2f} |")

    med = lambda v: statistics.median(v) if v else float("nan")  # noqa: E731
    by = {}
    rows_latest = [r for r in rows if r.get("run", "1") == latest]
    for r in rows_latest:
        by.setdefault((r["proxy"], float(r["warmup"]) > 0), []).append(float(r["time_s"]))
    warm_s = {w: med([float(r["warmup_s"]) for r in rows_latest if r["proxy"] == "sigeo" and float(r["warmup"]) == w])
              for w in LEVELS[1:]}
    n_zero = len({r["arch"] for r in rows if float(r["warmup"]) == 0})
    timing = (f"Run {latest}: median seconds per score, measured inside each of the 14-15 processes that shared the GPU (each waits "
              "while the others' kernels run, and every value read back to the CPU waits its turn): " + ", ".join(
                  f"{p} {med(by.get((p, False), [])):.3f}" for p in ["sigeo", "zico", "synflow", "naswot", "params"])
              + ". Warm-up per cell (median): " + ", ".join(f"{w:g}: {s:.2f} s" for w, s in warm_s.items())
              + ". Run 2 scored its cells in 721 s of wall time (299 s + 275 s + 147 s); run 1, when SiGeo's FR term "
              "still read one value back per parameter and batch, gave sigeo 2.528 s per score (now one read per "
              "batch).")
    cmd = "OUT=dir DATA=../shared/data benchmarks/nb201_gpu.sh"
    body = "\n".join([
        "<!-- gpu -->",
        "### On a GPU: one NVIDIA H100 80GB (lent for 15 minutes), torch 2.11.0+cu130",
        "",
        f"Scores: `{cmd}` with `WORKERS=14 LIMIT=270`, i.e. `ctrnas vision correlate --device cuda --workers 14 "
        "--time-limit 270 --archs 1000 --warmup 0,0.1,0.2,0.4,1.25 --warmup-archs 300 --proxies "
        "sigeo,zico,naswot,synflow,params`, then, on the same warm machine, resumed twice with `WORKERS=15 TESTS=0` "
        "and `LIMIT=250`, `LIMIT=125` (run 2). Before that the script ran `tests/device` on the GPU: 79 "
        "passed, 1 skipped (the trainer's device tests need TorchRec): every proxy and the harness give the CPU's "
        "scores on CUDA. The file also holds run 1 (an earlier lease of 15 minutes, 392 + 256 cells, same code "
        "for every proxy but SiGeo's FR read-back; zero-shot scores of the cells in both runs agree to 1e-9). "
        "Report: `.venv/bin/python benchmarks/nb201_gpu_report.py` on `benchmarks/results/nb201_gpu_scores.csv.gz`. "
        f"Cells scored: {n_zero} of the seeded 1000-cell sample at zero-shot (the rest did not fit the lease), "
        f"{len(this_run)} of the 300 warm-up cells (spread evenly over the sample) with all five levels in run 2, "
        f"{len(paired)} in either run. Setup as above (4 batches of 64 of the 4000-image sample, one seeded "
        "initialisation per cell, NB201's warm-up recipe), except: `zico` is ZiCo with its official gradient "
        "accumulation (the paper's ZiCo column) and `sigeo.zico` SiGeo's term 1 (per-batch ZiCo); full float32 "
        "(TF32 off), NCHW. Warm-up 1.25 = 79 steps = the paper's 10% step count. Goal: SiGeo ≥ 0.78 "
        "zero-shot, ≥ 0.83 after warm-up.",
        "",
        "#### Zero-shot",
        "",
        format_markdown(zero, PAPER_GPU),
        "",
        f"#### Warm-up levels, run 2: the same {len(this_run)} cells at every level",
        "",
        format_markdown(warm_latest, PAPER_GPU),
        "",
        f"#### Warm-up levels, both runs: {len(paired)} cells (run 2's scores where a cell is in both; a warmed-up "
        "score is not bit-reproducible on CUDA, see the reading)",
        "",
        format_markdown(warm, PAPER_GPU),
        "",
        "\n".join(rise),
        "",
        timing,
        "<!-- /gpu -->",
    ])
    print(body)
    old = SECTION.read_text() if SECTION.exists() else ""
    if "<!-- gpu -->" in old:
        head, _, rest = old.partition("<!-- gpu -->")
        new = head + body + rest.partition("<!-- /gpu -->")[2]
    else:
        new = old.rstrip("\n") + "\n\n" + body + "\n"
    SECTION.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
