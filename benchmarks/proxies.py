"""Proxy cost per NASRec subnet vs. one training step (SiGeo/ZiCo goal <= 6 steps' worth).

    .venv/bin/python benchmarks/proxies.py [--batch-size 512] [--k 4] [--candidates 32] [--proxies all]

A fresh nasrec-full supernet on a Criteo-shaped schema (13 dense, 26 sparse features, 1,000 ids each,
embedding dim 16); `--candidates` architectures are sampled (seed 0) and the ones with the smallest,
median and largest FLOPs (`ctrnas.supernet.counting.count_flops`) are scored as supernet paths
(`supernet.subnet(arch)`) on k random batches. Baseline, in the same process, on the same subnet: one
training step (forward, BCE, backward, Adagrad lr 0.12 step) of a copy of the supernet, timed right
before each proxy and once after the last (the CPUs are shared: the median of these steps is the
reference). Each proxy is timed once (`--repeats` for best-of). Writes benchmarks/sections/proxies.md.
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import shlex
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ctrnas.proxies import get_proxy, list_proxies
from ctrnas.supernet.counting import count_flops, count_params
from ctrnas.supernet.supernet import Supernet
from ctrnas.supernet.testing import make_batch, make_schema

CLASSIFICATION_ONLY = {"epe_nas"}


class TrainStep:
    """One training step of `arch` on a private copy of the supernet (forward, BCE, backward, Adagrad)."""

    def __init__(self, supernet, arch, batch):
        self.model = copy.deepcopy(supernet).subnet(arch)
        self.opt = torch.optim.Adagrad(self.model.parameters(), lr=0.12)
        self.batch = batch
        self()   # the first step allocates optimizer state

    def __call__(self) -> float:
        (dense, kjt), y = self.batch
        t = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        F.binary_cross_entropy_with_logits(self.model(dense, kjt), y).backward()
        self.opt.step()
        return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--candidates", type=int, default=32)
    ap.add_argument("--proxies", default="all", help="comma list or 'all'")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", default=str(Path(__file__).parent / "sections" / "proxies.md"))
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    names = [n for n in list_proxies() if n not in CLASSIFICATION_ONLY] if args.proxies == "all" else \
        args.proxies.split(",")
    schema = make_schema(n_dense=13, cards=(1000,) * 26)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        supernet = Supernet(schema, "nasrec-full")
    rng = np.random.default_rng(0)
    archs = [supernet.space.sample(rng) for _ in range(args.candidates)]
    archs.sort(key=lambda a: count_flops(schema, supernet.space, a))
    picks = {"small": archs[0], "median": archs[len(archs) // 2], "large": archs[-1]}
    batches = []
    for s in range(args.k):
        d, kjt, y = make_batch(schema, args.batch_size, seed=s)
        batches.append(((d, kjt), y))
    results, steps, info = {}, {}, {}
    for size, arch in picks.items():
        info[size] = (count_params(schema, supernet.space, arch), count_flops(schema, supernet.space, arch))
        step = TrainStep(supernet, arch, batches[0])
        sub = supernet.subnet(arch)
        step_times = []
        for n in names:
            # A step right before each proxy: the CPUs are shared, so the reference follows the load.
            step_times.append(step())
            best = float("inf")
            for _ in range(args.repeats):
                t = time.perf_counter()
                get_proxy(n).score(sub, batches, F.binary_cross_entropy_with_logits)
                best = min(best, time.perf_counter() - t)
            results[(n, size)] = best
            print(f"{size:>6} {n:<10} {best:8.3f} s (step {step_times[-1]:.3f} s)", flush=True)
        step_times.append(step())
        steps[size] = statistics.median(step_times)
        del step
    header = "| proxy | " + " | ".join(f"{s}: s (steps)" for s in picks) + " |"
    lines = [header, "|---|" + "---|" * len(picks)]
    lines.append("| one training step | " + " | ".join(f"{steps[s]:.3f} (1.0)" for s in picks) + " |")
    for n in names:
        cells = [f"{results[(n, s)]:.3f} ({results[(n, s)] / steps[s]:.1f})" for s in picks]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    cmd = ".venv/bin/python " + " ".join(shlex.quote(a) for a in ["benchmarks/proxies.py", *(argv or sys.argv[1:])])
    subnets = ", ".join(f"{s}: {info[s][0]:,} dense params, {info[s][1]:,} FLOPs/example" for s in picks)
    md = (f"## Proxy cost per subnet vs. one training step (benchmarks/proxies.py)\n\nCommand: `{cmd}`\n\n"
          f"Machine: {platform.machine()}, {os.cpu_count()} CPUs shared with other jobs (load average "
          f"{os.getloadavg()[0]:.1f} at the end), {torch.get_num_threads()} torch threads, torch {torch.__version__}. "
          f"Fresh nasrec-full supernet (seed 0), Criteo-shaped schema (13 dense, 26 sparse x 1,000 ids, d=16); "
          f"k={args.k} batches of {args.batch_size}; subnets = smallest/median/largest FLOPs of "
          f"{args.candidates} sampled architectures ({subnets}). Each cell: seconds for one score of the "
          f"subnet, and in brackets that time divided by one training step of the same subnet (forward + "
          f"backward + Adagrad step; median of the steps timed between the proxies). Proxies with defaults "
          f"(SiGeo zero_shot, k=4; NTK/HNAS on 64 samples; Dextr 16 circle points). Goal for SiGeo and ZiCo: "
          f"<= 6 steps.\n\n{table}\n")
    load = os.getloadavg()[0]
    if load > (os.cpu_count() or 1):
        md += (f"\nThe CPUs were oversubscribed (load {load:.1f} on {os.cpu_count()} CPUs): absolute times are "
               "inflated several-fold and single training steps of one subnet varied by several times "
               "between proxies, so a ratio is good to about a factor of 2. Rerun on an idle machine for "
               "tighter numbers.\n")
    Path(args.out).write_text(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
