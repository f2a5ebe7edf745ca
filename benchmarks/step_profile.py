"""Where one training step's time goes, how far it is from this core's matmul limit, and what the levers buy.

For DLRM and DCN-v2 (the trainer's baselines, synthetic Criteo profile), batch 512, one torch thread:

1. Profile: one step cut into data loading, lookups, interaction, MLPs, loss, backward (dense part / tables),
   clipping and optimizer, each timed by itself (medians over many steps); Python overhead = the trainer's whole
   step minus the parts.
2. Limit: the step's FLOPs (matrix products, forward and backward, counted by torch's FlopCounterMode as
   `ctrnas.supernet.counting.count_flops` counts them) and the time torch.mm / addmm / bmm take for exactly the
   step's products, each timed alone at its shape: that time is the step's floor on this core, and
   floor / step time is the share of the limit reached. The same for the bare PyTorch loop.
3. Levers, side by side in one process with interleaved repetitions (medians): the bare loop (the model, torch's
   Adagrad, the same schedule and clipping, written plainly), the trainer, the trainer with the tables in one
   FBGEMM TBE with exact Adagrad fused into the backward (`ctrnas.supernet.fused`), that plus `torch.compile`
   of the dense part (compile time counted), batch loading overlapped with compute (a prefetch thread), and a
   larger batch.
4. Whole runs: one epoch over the training split, rows per CPU-second (process time of the training loop) and
   test log loss, for the bare loop, the trainer, and the trainer with the winning levers, per training seed.

Usage: python benchmarks/step_profile.py [--rows 300000] [--models dlrm,dcnv2] [--seeds 0,1]
           [--json benchmarks/out/step-profile.json] [--out benchmarks/sections/step-profile.md]
       python benchmarks/step_profile.py --render benchmarks/out/step-profile.json
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import queue
import resource
import shlex
import statistics
import sys
import threading
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import notes_marker, publish, save  # noqa: E402
from train import ensure_data  # noqa: E402

from ctrnas.data.dataset import load_schema  # noqa: E402
from ctrnas.supernet.fused import FusedAdagrad  # noqa: E402
from ctrnas.train.baselines import build_baseline  # noqa: E402
from ctrnas.train.baselines.common import flat_input  # noqa: E402
from ctrnas.train.batches import dataset_batches  # noqa: E402
from ctrnas.train.config import TrainConfig, lr_at  # noqa: E402
from ctrnas.train.metrics import StreamingMetrics  # noqa: E402
from ctrnas.train.trainer import Trainer, split_parameters  # noqa: E402

# CPU time of this thread: the box is shared, and a step on one torch thread runs on this thread alone
clock = time.thread_time


def cpu_with_children() -> float:
    """CPU seconds of this process and of its finished children (compiler workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def median(xs):
    return statistics.median(xs) if xs else float("nan")


# -- the dense part of each model, in pieces ------------------------------------------------------------------
def dense_pieces(kind: str, model: nn.Module):
    """[(piece name, fn(state) -> state)] from (dense, tokens) to logits, each piece one timer."""
    if kind == "dlrm":
        return [("MLPs", lambda s: {**s, "d": model.dense_arch(s["dense"])}),
                ("interaction", lambda s: {**s, "x": model.interaction(s["d"], s["tok"])}),
                ("MLPs", lambda s: {**s, "logit": model.over_arch(s["x"]).squeeze(1)})]
    return [("interaction", lambda s: {**s, "x0": flat_input(s["dense"], s["tok"])}),
            ("interaction", lambda s: {**s, "c": model.cross(s["x0"])}),
            ("MLPs", lambda s: {**s, "h": model.deep(s["x0"])}),
            ("MLPs", lambda s: {**s, "logit": model.out(torch.cat([s["c"], s["h"]], dim=1)).squeeze(1)})]


def dense_forward(kind: str, model: nn.Module):
    """fn(dense, tokens) -> logits: the model's forward after the lookups (what torch.compile gets)."""
    if kind == "dlrm":
        return lambda dense, tok: model.over_arch(model.interaction(model.dense_arch(dense), tok)).squeeze(1)
    return lambda dense, tok: model.out(torch.cat([model.cross(x := flat_input(dense, tok)), model.deep(x)],
                                                  dim=1)).squeeze(1)


# -- the contenders -------------------------------------------------------------------------------------------
class Bare:
    """The loop a PyTorch user writes: sparse nn.EmbeddingBag gradients, torch's Adagrad with its defaults for
    the tables and for the rest, the same schedule and clipping as the trainer."""

    def __init__(self, model: nn.Module, cfg: TrainConfig):
        self.model, self.cfg, self.step = model, cfg, 0
        for m in model.modules():
            if hasattr(m, "use_sparse_gradients"):
                m.use_sparse_gradients(True)
        emb, self.dense = split_parameters(model)
        self.opts = [torch.optim.Adagrad(self.dense, lr=cfg.lr, eps=cfg.eps),
                     torch.optim.Adagrad(emb, lr=cfg.lr, eps=cfg.eps)]

    def train_step(self, batch, total: int) -> float:
        lr = lr_at(self.cfg, self.step, total)
        for o in self.opts:
            for g in o.param_groups:
                g["lr"] = lr
        loss = F.binary_cross_entropy_with_logits(self.model(batch.dense_features, batch.sparse_features),
                                                  batch.labels)
        for o in self.opts:
            o.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.dense, self.cfg.clip_norm)
        for o in self.opts:
            o.step()
        self.step += 1
        return loss.item()


def fuse(trainer: Trainer) -> Trainer:
    """The trainer with its tables under one TBE with exact Adagrad (what the wiring patch does in __init__)."""
    fused = FusedAdagrad(trainer.model, trainer.cfg.lr, trainer.cfg.eps)
    # keep the dense part's (fused CPU) Adagrad, drop the tables' sparse one
    trainer.optimizers = [o for o in trainer.optimizers if o.defaults.get("fused")] + [fused]
    return trainer


def compile_dense(kind: str, model: nn.Module) -> None:
    """torch.compile the model's forward after the lookups (inductor, dynamic=False: one batch size). Compiled
    in this process with no cache, so its whole cost shows in the first step's CPU time."""
    import torch._inductor.config as inductor

    inductor.compile_threads = 1
    torch.compiler.config.force_disable_caches = True
    fn = torch.compile(dense_forward(kind, model), dynamic=False)
    model.forward = lambda dense, kjt: fn(dense, model.stem(kjt))


def bf16_dense(kind: str, model: nn.Module) -> None:
    """The training forward after the lookups under CPU autocast to bfloat16 (weights and lookups stay float32;
    matrix products and their backward run in bfloat16, the logits come back as float32). Evaluation runs in
    float32, as the exported model does."""
    fn = dense_forward(kind, model)

    def forward(dense, kjt):
        tok = model.stem(kjt)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=model.training):  # evaluated as exported
            return fn(dense, tok).float()

    model.forward = forward


def make(kind: str, variant: str, schema, cfg: TrainConfig):
    model = build_baseline(kind, schema, cfg.embedding_dim, cfg.row_cap, cfg.seed)
    if variant == "bare":
        return Bare(model, cfg)
    t = Trainer(model, cfg)
    if variant in ("fused", "fused+compile", "fused+bf16"):
        fuse(t)
    if variant == "fused+bf16":
        bf16_dense(kind, model)
    if variant == "fused+compile":
        compile_dense(kind, model)
    return t


# -- batches --------------------------------------------------------------------------------------------------
def take(data: Path, split: str, batch_size: int, n: int, seed: int = 0) -> list:
    out = []
    for b in dataset_batches(data, split, batch_size, shuffle=True, seed=seed).batches():
        out.append(b)
        if len(out) >= n:
            break
    return out


def prefetched(it, depth: int = 2):
    """Batches of `it` read ahead by a thread (the loader's Arrow reads and tensor building release the GIL)."""
    q: queue.Queue = queue.Queue(depth)
    end = object()

    def run():
        for b in it:
            q.put(b)
        q.put(end)

    threading.Thread(target=run, daemon=True).start()
    while (b := q.get()) is not end:
        yield b


# -- 1. profile -----------------------------------------------------------------------------------------------
def profiled_step(kind: str, t: Trainer, it, total: int) -> dict:
    """One trainer step (today's math) cut into timed parts; returns ms per part."""
    ms: dict[str, float] = {}

    def tick(name, t0):
        ms[name] = ms.get(name, 0.0) + (clock() - t0) * 1e3
        return clock()

    model, cfg = t.model, t.cfg
    t0 = clock()
    batch = next(it)
    t0 = tick("data loading", t0)
    lr = lr_at(cfg, t.step, total)
    for o in t.optimizers:
        for g in o.param_groups:
            g["lr"] = lr
    tok = model.stem(batch.sparse_features)
    t0 = tick("lookups", t0)
    tok_d = tok.detach().requires_grad_()
    s = {"dense": batch.dense_features, "tok": tok_d}
    for name, piece in dense_pieces(kind, model):
        s = piece(s)
        t0 = tick(name, t0)
    loss = F.binary_cross_entropy_with_logits(s["logit"], batch.labels)
    float(loss.detach())
    t0 = tick("loss", t0)
    for o in t.optimizers:
        o.zero_grad(set_to_none=True)
    t0 = tick("optimizer, dense part", t0)
    loss.backward()
    t0 = tick("backward, dense part", t0)
    tok.backward(tok_d.grad)
    t0 = tick("backward, tables", t0)
    nn.utils.clip_grad_norm_(t.dense_params, cfg.clip_norm)
    t0 = tick("clipping", t0)
    t.optimizers[0].step()
    t0 = tick("optimizer, dense part", t0)
    for o in t.optimizers[1:]:
        o.step()
    tick("optimizer, tables", t0)
    t.step += 1
    return ms


def profile(kind: str, data: Path, cfg: TrainConfig, steps: int, variant: str) -> dict:
    """Median ms of each part over `steps` steps, and of whole trainer steps interleaved with them."""
    schema = load_schema(data)
    t_parts, t_whole = make(kind, variant, schema, cfg), make(kind, variant, schema, cfg)
    total = 10 * steps
    it_parts = iter(dataset_batches(data, "train", cfg.batch_size, shuffle=True, seed=cfg.seed).batches())
    it_whole = iter(dataset_batches(data, "train", cfg.batch_size, shuffle=True, seed=cfg.seed).batches())
    parts: dict[str, list[float]] = {}
    whole, load = [], []
    for i in range(steps + 3):
        p = profiled_step(kind, t_parts, it_parts, total)
        t0 = clock()
        b = next(it_whole)
        t1 = clock()
        t_whole.train_step(b, total)
        t2 = clock()
        if i >= 3:  # the first steps allocate optimizer state
            for k, v in p.items():
                parts.setdefault(k, []).append(v)
            whole.append((t2 - t1) * 1e3)
            load.append((t1 - t0) * 1e3)
    out = {k: median(v) for k, v in parts.items()}
    out["trainer step (no loading)"] = median(whole)
    out["data loading, whole"] = median(load)
    timed = sum(v for k, v in out.items() if k not in ("data loading", "trainer step (no loading)",
                                                       "data loading, whole"))
    out["Python overhead"] = out["trainer step (no loading)"] - timed
    return out


# -- 2. the limit ---------------------------------------------------------------------------------------------
class MatmulShapes(TorchDispatchMode):
    """Records every mm / addmm / bmm of the step with its operand shapes."""

    OPS = {torch.ops.aten.mm.default: "mm", torch.ops.aten.addmm.default: "addmm", torch.ops.aten.bmm.default: "bmm"}

    def __init__(self):
        super().__init__()
        self.calls: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in self.OPS:
            shapes = tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))
            self.calls.append((self.OPS[func], shapes))
        return func(*args, **(kwargs or {}))


def time_matmul(op: str, shapes: tuple, reps: int, dtype=torch.float32) -> float:
    """Median seconds of one torch matmul at these shapes, operands contiguous, of `dtype`."""
    args = [torch.randn(s, dtype=dtype) for s in shapes]
    fn = {"mm": torch.mm, "addmm": torch.addmm, "bmm": torch.bmm}[op]
    for _ in range(3):
        fn(*args)
    times = []
    for _ in range(reps):
        t0 = clock()
        fn(*args)
        times.append(clock() - t0)
    return median(times)


def limit(kind: str, data: Path, cfg: TrainConfig, reps: int) -> dict:
    """FLOPs of one training step (forward and backward) and the time of its matmuls alone on this core."""
    schema = load_schema(data)
    t = make(kind, "trainer", schema, cfg)
    batch = take(data, "train", cfg.batch_size, 1)[0]
    t.train_step(batch, 100)
    fc, shapes = FlopCounterMode(display=False), MatmulShapes()
    with fc, shapes:
        t.train_step(batch, 100)
    flops = fc.get_total_flops()
    counts: dict[tuple, int] = {}
    for c in shapes.calls:
        counts[c] = counts.get(c, 0) + 1
    floor = sum(n * time_matmul(op, s, reps) for (op, s), n in counts.items())
    floor_bf16 = sum(n * time_matmul(op, s, reps, torch.bfloat16) for (op, s), n in counts.items())
    fwd = FlopCounterMode(display=False)
    with fwd, torch.no_grad():
        t.model(batch.dense_features, batch.sparse_features)
    return {"flops_step": flops, "flops_forward_per_row": fwd.get_total_flops() / cfg.batch_size,
            "matmul_floor_ms": floor * 1e3, "matmul_floor_bf16_ms": floor_bf16 * 1e3,
            "gflops_at_floor": flops / floor / 1e9, "shapes": len(counts), "calls": len(shapes.calls)}


# -- 3. levers side by side -----------------------------------------------------------------------------------
def levers(kind: str, data: Path, cfg: TrainConfig, variants: list[str], steps: int, reps: int,
           big_batch: int) -> dict:
    """Median ms per step (batches held in memory) and per row, interleaved: each rep runs `steps` steps of
    every variant in turn. Compile time = first step of the compiled variant minus a warm step."""
    schema = load_schema(data)
    batches = take(data, "train", cfg.batch_size, steps * reps + 3)
    big = take(data, "train", big_batch, max(steps * reps // 4, 4) + 3) if big_batch else []
    total = 10 * len(batches)
    runners, times, first = {}, {}, {}
    for v in variants:
        c = cfg if v != f"batch {big_batch}" else TrainConfig(**{**cfg.__dict__, "batch_size": big_batch})
        runners[v] = make(kind, "fused" if v.startswith("batch") else v, schema, c)
        src = big if v.startswith("batch") else batches
        t0 = cpu_with_children()
        runners[v].train_step(src[0], total)
        first[v] = cpu_with_children() - t0  # inductor compiles in worker processes: count their CPU too
        for b in src[1:3]:
            runners[v].train_step(b, total)
        times[v] = []
    for r in range(reps):
        for v in variants:
            if v.startswith("batch"):
                k = max(steps // 4, 1)
                src = big[3 + r * k: 3 + (r + 1) * k] or big[3:3 + k]
            else:
                src = batches[3 + r * steps: 3 + (r + 1) * steps]
            t0 = clock()
            for b in src:
                runners[v].train_step(b, total)
            times[v].append((clock() - t0) / len(src) / src[0].labels.shape[0])
    out = {v: {"ms_per_row": median(x) * 1e3, "ms_per_step_512": median(x) * 1e3 * cfg.batch_size,
               "first_step_s": first[v]} for v, x in times.items()}
    if "fused+compile" in out:
        warm = out["fused+compile"]["ms_per_step_512"] / 1e3
        out["fused+compile"]["compile_s"] = first["fused+compile"] - warm
    return out


def loading(data: Path, cfg: TrainConfig) -> dict:
    """Wall and CPU ms per batch of the loader alone over a whole epoch (it reads in windows of rows, so the
    cost comes in bursts: the mean is what a step pays; this bounds what overlapping loading can hide)."""
    src = dataset_batches(data, "train", cfg.batch_size, shuffle=True, seed=cfg.seed)
    w0, c0, k = time.perf_counter(), time.process_time(), 0
    for _ in src.batches():
        k += 1
    return {"wall_ms": (time.perf_counter() - w0) / k * 1e3, "cpu_ms": (time.process_time() - c0) / k * 1e3,
            "batches": k}


# -- 4. whole runs --------------------------------------------------------------------------------------------
def evaluate(model: nn.Module, data: Path) -> float:
    model.eval()
    m = StreamingMetrics()
    with torch.no_grad():
        for b in dataset_batches(data, "test", 4096).batches():
            m.update(model(b.dense_features, b.sparse_features).reshape(-1), b.labels.reshape(-1))
    model.train()
    return m.result().logloss


def whole_run(kind: str, variant: str, data: Path, cfg: TrainConfig) -> dict:
    """One epoch: rows per CPU-second and per wall-second of the training loop (loading included), test log loss."""
    schema = load_schema(data)
    prefetch = variant.endswith("+prefetch")
    r = make(kind, variant.removesuffix("+prefetch"), schema, cfg)
    src = dataset_batches(data, "train", cfg.batch_size, shuffle=True, seed=cfg.seed)
    total, rows = len(src), 0
    model = r.model
    model.train()
    it = prefetched(src.batches()) if prefetch else src.batches()
    w0, c0 = time.perf_counter(), time.process_time()
    for b in it:
        r.train_step(b, total)
        rows += b.labels.shape[0]
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    ll = evaluate(model, data)
    out = {"model": kind, "variant": variant, "seed": cfg.seed, "batch": cfg.batch_size, "lr": cfg.lr,
           "rows": rows, "cpu_s": cpu, "wall_s": wall, "rows_per_cpu_s": rows / cpu, "rows_per_s": rows / wall,
           "test_logloss": ll}
    print(f"  {kind} {variant} seed {cfg.seed} batch {cfg.batch_size}: {out['rows_per_cpu_s']:,.0f} rows/CPU-s, "
          f"{out['rows_per_s']:,.0f} rows/s, test log loss {ll:.5f}", flush=True)
    return out


# -- report ---------------------------------------------------------------------------------------------------
PARTS = ["data loading", "lookups", "interaction", "MLPs", "loss", "backward, dense part", "backward, tables",
         "clipping", "optimizer, dense part", "optimizer, tables", "Python overhead"]


def markdown(res: dict) -> str:
    a = res["args"]
    models = [m for m in a["models"].split(",") if m in res["profile"] and m in res["levers"]]
    lines = ["## Where a training step's time goes (`benchmarks/step_profile.py`)", "",
             f"Command: `{a['command']}`", "",
             f"Data: synthetic Criteo profile, {res['meta']['source']['rows']:,} rows (seed "
             f"{res['meta']['source']['seed']}), train {res['meta']['splits']['train']['rows']:,} / test "
             f"{res['meta']['splits']['test']['rows']:,}. Baselines at embedding dim 16, NASRec recipe "
             f"(Adagrad lr {a['lr']}, eps 1e-2, batch {a['batch_size']}, clip 5, cosine schedule), torch threads 1. "
             f"Machine: {a['machine']}.", ""]
    st = res.get("settings", {})
    per = ", ".join(f"{m} {st.get(m, {}).get('steps', a['steps'])}" for m in models)
    lines += [f"Profile of one step, CPU ms of the training thread (medians of {per} steps; each part timed by "
              "itself; 'Python overhead' = the trainer's whole step minus the timed parts, so it also takes the "
              "timers' noise):", "",
              "| part | " + " | ".join(f"{m} {v}" for m in models for v in res["profile"][m]) + " |",
              "|---|" + "---:|" * sum(len(res["profile"][m]) for m in models)]
    for p in PARTS:
        if p == "data loading":  # the loader reads windows of rows: a step pays the mean, not the median
            lines.append(f"| data loading (epoch mean, CPU) | " + " | ".join(
                f"{res['loading']['cpu_ms']:.1f}" for m in models for v in res["profile"][m]) + " |")
            continue
        lines.append(f"| {p} | " + " | ".join(f"{res['profile'][m][v].get(p, float('nan')):.1f}"
                                               for m in models for v in res["profile"][m]) + " |")
    lines.append("| **trainer step without loading** | " + " | ".join(
        f"**{res['profile'][m][v]['trainer step (no loading)']:.1f}**" for m in models for v in res["profile"][m])
        + " |")
    lines += ["", "The limit: the trainer step's matrix products (forward and backward, torch's FlopCounterMode, the "
              "convention of `count_flops`) each timed alone with torch.mm / addmm / bmm at its own shapes on "
              "this core; their sum is the floor of a step, and floor / step time the share of the limit "
              "reached. Lookups, optimizer and elementwise work are outside the floor (memory-bound, no FLOPs "
              "counted). The bfloat16 floor times the same products in bfloat16 (this core has AVX-512 BF16): "
              "the limit of the contender that runs them so; the others are held to the float32 floor.", "",
              "| model | GFLOP per step | forward MFLOP per row | float32 floor ms | GFLOP/s at it | "
              "bfloat16 floor ms | contender | CPU ms per step | share of the limit |",
              "|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for m in models:
        lim = res["limit"][m]
        for v, row in res["levers"][m].items():
            if v.startswith("batch"):
                continue
            bf = lim.get("matmul_floor_bf16_ms")
            floor = bf if v.endswith("bf16") else lim["matmul_floor_ms"]
            lines.append(f"| {m} | {lim['flops_step'] / 1e9:.2f} | {lim['flops_forward_per_row'] / 1e6:.2f} | "
                         f"{lim['matmul_floor_ms']:.1f} | {lim['gflops_at_floor']:.1f} | "
                         f"{'-' if bf is None else f'{bf:.1f}'} | {v} | "
                         f"{row['ms_per_step_512']:.1f} | {floor / row['ms_per_step_512']:.0%} |")
    reps = ", ".join(f"{m} {st.get(m, {}).get('reps', a['reps'])} of "
                     f"{st.get(m, {}).get('steps_per_rep', a['steps_per_rep'])}" for m in models)
    lines += ["", f"Levers side by side: CPU ms per step of 512 rows (batches in memory; medians of interleaved "
              f"repetitions of several steps: {reps}; the larger batch as ms per 512 rows), "
              "ratio = the bare loop's time / the contender's. First step: CPU seconds of the process and its "
              "compiler workers.", "",
              "| model | contender | ms / 512 rows | vs bare loop | vs trainer | first step, CPU s |",
              "|---|---|---:|---:|---:|---:|"]
    for m in models:
        lv = res["levers"][m]
        for v, row in lv.items():
            extra = f" (compile {row['compile_s']:.0f} s)" if "compile_s" in row else ""
            lines.append(f"| {m} | {v} | {row['ms_per_step_512']:.1f} | "
                         f"{lv['bare']['ms_per_step_512'] / row['ms_per_step_512']:.2f}x | "
                         f"{lv['trainer']['ms_per_step_512'] / row['ms_per_step_512']:.2f}x | "
                         f"{row['first_step_s']:.1f}{extra} |")
    ld = res["loading"]
    lines += ["", f"Data loading alone: {ld['wall_ms']:.1f} ms wall, {ld['cpu_ms']:.1f} ms CPU per batch of "
              f"{a['batch_size']}, the mean over one epoch ({ld['batches']} batches; it reads windows of rows, so "
              "the cost comes in bursts). Overlapping it with compute can hide at most that from the wall time, and "
              "nothing from the CPU time.", ""]
    if res.get("runs"):
        lines += ["Whole runs, one epoch over the training split (loading included): rows per CPU-second of the "
                  "training loop (process time), ratio to the bare loop of the same seed, and test log loss.", "",
                  "| model | contender | batch | lr | seed | rows/CPU-s | rows/s (wall) | vs bare, CPU | "
                  "test log loss |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        bare = {(r["model"], r["seed"]): r for r in res["runs"] if r["variant"] == "bare"}
        for r in res["runs"]:
            ref = bare.get((r["model"], r["seed"]))
            ratio = f"{r['rows_per_cpu_s'] / ref['rows_per_cpu_s']:.2f}x" if ref else "-"
            lines.append(f"| {r['model']} | {r['variant']} | {r['batch']} | {r['lr']:g} | {r['seed']} | "
                         f"{r['rows_per_cpu_s']:,.0f} | {r['rows_per_s']:,.0f} | {ratio} | {r['test_logloss']:.5f} |")
        lines.append("")
        lines += goal(res, bare)
    return "\n".join(lines)


def goal(res: dict, bare: dict) -> list[str]:
    """Per model and contender: rows per CPU-second against the bare loop (mean of the seeds' ratios), test log
    loss against the bare loop's (mean of the seeds' differences) beside the bare loop's seed-to-seed spread,
    and the bare loop's share of the limit (which form of the goal applies: 1.5x, or 90% of the limit when the
    bare loop is above 65% of it)."""
    lines = ["| model | contender | batch | lr | seeds | rows/CPU-s vs bare (mean of seeds) | test log loss - bare's "
             "(mean) | bare's seed spread | bare's share of the limit |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    groups: dict[tuple, list] = {}
    for r in res["runs"]:
        if r["variant"] != "bare" and (r["model"], r["seed"]) in bare:
            groups.setdefault((r["model"], r["variant"], r["batch"], r["lr"]), []).append(r)
    for (m, v, b, lr), rs in groups.items():
        refs = [bare[(m, r["seed"])] for r in rs]
        ratio = statistics.mean(r["rows_per_cpu_s"] / f["rows_per_cpu_s"] for r, f in zip(rs, refs))
        dll = statistics.mean(r["test_logloss"] - f["test_logloss"] for r, f in zip(rs, refs))
        lls = [f["test_logloss"] for f in refs]
        spread = f"{max(lls) - min(lls):.5f}" if len(lls) > 1 else "-"
        lim, lv = res["limit"].get(m), res["levers"].get(m, {}).get("bare")
        share = f"{lim['matmul_floor_ms'] / lv['ms_per_step_512']:.0%}" if lim and lv else "-"
        lines.append(f"| {m} | {v} | {b} | {lr:g} | {len(rs)} | {ratio:.2f}x | {dll:+.5f} | {spread} | "
                     f"{share} |")
    return lines + [""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--data", default=str(ROOT / "benchmarks" / "out" / "criteo-300k"))
    ap.add_argument("--models", default="dlrm,dcnv2")
    ap.add_argument("--seeds", default="0,1", help="training seeds of the whole runs ('' = no whole runs)")
    ap.add_argument("--runs", default="bare,trainer,fused", help="contenders of the whole runs")
    ap.add_argument("--steps", type=int, default=40, help="profiled steps per model")
    ap.add_argument("--reps", type=int, default=7, help="interleaved repetitions of the levers")
    ap.add_argument("--steps-per-rep", type=int, default=8)
    ap.add_argument("--levers", default="bare,trainer,fused,fused+compile")
    ap.add_argument("--big-batch", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=0.12)
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--machine", default="x86_64, 2 CPU cores shared with other jobs, no GPU")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "out" / "step-profile.json"))
    ap.add_argument("--parts", default="loading,profile,levers,runs")
    ap.add_argument("--append", action="store_true", help="add to the results already in --json")
    ap.add_argument("--render", default=None, help="a --json file: rewrite --out from it, no runs")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "sections" / "step-profile.md"))
    args = ap.parse_args(argv)
    if args.render:  # a comma list: the first file, plus the whole runs and commands of the others
        files = [json.loads(Path(f).read_text()) for f in args.render.split(",")]
        res = files[0]
        for other in files[1:]:
            res["runs"] += [r for r in other["runs"] if r not in res["runs"]]
            res["commands"] += [c for c in other["commands"] if c not in res["commands"]]
        res["args"]["command"] = "; ".join(res["commands"] + [shlex.join(
            ["python", "benchmarks/step_profile.py", *(sys.argv[1:] if argv is None else argv)])])
    else:
        torch.set_num_threads(1)
        command = shlex.join(["python", "benchmarks/step_profile.py", *(sys.argv[1:] if argv is None else argv)])
        data = Path(args.data)
        meta = ensure_data(data, args.rows, 0)
        cfg = TrainConfig(lr=args.lr, batch_size=args.batch_size, seed=0, progress=False, threads=1,
                          embedding_update="sparse")  # "trainer": sparse Adagrad; "fused" is a lever
        models = args.models.split(",")
        prev = Path(args.json)
        res = json.loads(prev.read_text()) if args.append and prev.exists() else \
            {"args": {}, "commands": [], "meta": meta, "profile": {}, "limit": {}, "levers": {}, "runs": []}
        res["args"] = {**res["args"], **{k: v for k, v in vars(args).items() if k != "models"}}
        res["args"]["models"] = ",".join(dict.fromkeys([*filter(None, res["args"].get("models", "").split(",")),
                                                        *models]))
        res["commands"].append(command)
        res["args"]["command"] = "; ".join(res["commands"])

        def keep():
            save(Path(args.json).parent, Path(args.json).stem, res)

        parts = args.parts.split(",")
        if "loading" in parts:
            res["loading"] = loading(data, cfg)
            print("loading", res["loading"], flush=True)
            keep()
        for m in models:
            st = res.setdefault("settings", {}).setdefault(m, {}) if {"profile", "levers"} & set(parts) else {}
            if "profile" in parts:
                st["steps"] = args.steps
                res["profile"][m] = {v: profile(m, data, cfg, args.steps, v) for v in ("trainer", "fused")}
                print(m, "profile", json.dumps(res["profile"][m], indent=0), flush=True)
                res["limit"][m] = limit(m, data, cfg, 50)
                print(m, "limit", res["limit"][m], flush=True)
                keep()
            if "levers" in parts:
                st.update(reps=args.reps, steps_per_rep=args.steps_per_rep)
                variants = [v for v in args.levers.split(",") if v] + \
                    ([f"batch {args.big_batch}"] if args.big_batch else [])
                res["levers"][m] = levers(m, data, cfg, variants, args.steps_per_rep, args.reps, args.big_batch)
                print(m, "levers", res["levers"][m], flush=True)
                keep()
        if "runs" in parts:
            for seed in [int(s) for s in args.seeds.split(",") if s]:
                for m in models:
                    for v in [v for v in args.runs.split(",") if v]:
                        c = TrainConfig(**{**cfg.__dict__, "seed": seed})
                        if v.startswith("batch"):  # "batch N [lr X]": fused tables, batch N, lr X, by default
                            w = v.split()  # lr x sqrt(N / 512) (Adagrad)
                            n = int(w[1])
                            lr = float(w[3]) if len(w) > 3 else cfg.lr * math.sqrt(n / cfg.batch_size)
                            c = TrainConfig(**{**c.__dict__, "batch_size": n, "lr": lr})
                        res["runs"].append(whole_run(m, "fused" if v.startswith("batch") else v, data, c))
                        keep()
    publish(markdown(res), Path(args.out), notes_marker("step_profile.py"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
