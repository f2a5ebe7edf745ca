"""Rungs study on the demo data (issue 16): how well each fidelity of the multi-fidelity search ranks subnets.

    nice -n 5 .venv/bin/python benchmarks/rungs.py --parts truth --archs 24 --seed1 12 --workers 2
    nice -n 5 .venv/bin/python benchmarks/rungs.py --parts rungs
    .venv/bin/python benchmarks/rungs.py --report-only

Data: the demo's synthetic Criteo profile (300k rows, 240k training rows), copied to
benchmarks/out/rungs/data-300k. Space: the demo recipe's (`recipes/synthetic.yaml`: ctrnas-small, 7 blocks,
its widths). Parts (each saves benchmarks/out/rungs/<part>.json; re-running resumes):
  truth   N random subnets trained as the final stage trains (2 epochs, best val epoch, all training rows),
          training seed 0; the first M of them again with training seed 1 (the reproducibility ceiling).
  rungs   every rung of the ladder scored on the same subnets: SiGeo / ZiCo / params (and the normalised
          variants) after warm-up 0 / 0.01 / 1, inherited-weight one-shot after 50 / 500 fine-tuning steps,
          from-scratch short training on 1 / 5 / 20 % of the training rows; Kendall tau and Spearman rho
          against the truth, each with its cost per subnet in full-training equivalents (FTE).
  halving successive halving over the trained subnets, first rung SiGeo vs random at equal FTE (offline).
The section goes to benchmarks/sections/rungs.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import _results  # noqa: E402  (benchmarks/ is the script folder, first on sys.path)

OUT = ROOT / "benchmarks/out/rungs"
SECTION = ROOT / "benchmarks/sections/rungs.md"


def base_recipe(args, *extra: str):
    from ctrnas.recipe import load_recipe

    return load_recipe(ROOT / "recipes/synthetic.yaml", [
        "name=rungs", f"output={OUT}/{{name}}", f"data.path={OUT}/data-300k", "train.progress=false",
        "threads=1", *args.set, *extra])


def truth_dir(seed: int) -> Path:
    return OUT / "rungs" / ("study" if seed == 0 else f"study-seed{seed}")


def part_truth(args) -> dict:
    """Train the subnets from scratch (cached in trained.json per training seed)."""
    from ctrnas import api
    from ctrnas.pipeline.stages import new_supernet
    from ctrnas.pipeline.study import _train_all, sample_archs

    out = {}
    for seed, n in ((0, args.archs), (1, args.seed1)):
        if n <= 0:
            continue
        recipe = base_recipe(args, f"final.train.seed={seed}")
        data = api.prepare_data(recipe)
        archs = sample_archs(base_recipe(args), args.archs)[:n]  # the same archs for both seeds
        d = truth_dir(seed)
        d.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        trained = _train_all(recipe, data, archs, new_supernet(recipe, data), d / "trained.json",
                             progress=True, workers=args.workers)
        out[str(seed)] = {"n": len(archs), "seconds": time.perf_counter() - t0,
                          "train_seconds": sum(trained[a.key()]["seconds"] for a in archs)}
    _results.save(OUT, "truth", out)
    return out


def main() -> int:
    global OUT, SECTION
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="truth,rungs,halving")
    ap.add_argument("--archs", type=int, default=24)
    ap.add_argument("--seed1", type=int, default=12, help="subnets retrained with training seed 1")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra recipe overrides")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    OUT = Path(args.out or OUT)

    import torch

    torch.set_num_threads(1)
    if not args.report_only:
        for part in args.parts.split(","):
            t0 = time.perf_counter()
            {"truth": part_truth}[part](args)
            print(f"part {part} done in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
