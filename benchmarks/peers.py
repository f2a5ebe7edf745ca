"""ctrnas's trainer against a bare PyTorch loop and the CTR libraries users compare it with: DeepCTR-Torch
and FuxiCTR, for DCN-v2 and DLRM, in rows per CPU-second of the training loop and test log loss.

One epoch over the training split of a prepared dataset (default: the synthetic Criteo profile at 300k rows),
batch 512, one torch thread. Every contender sees the same batches in the same order: the epoch's batches are
read with ctrnas's loader (seeded shuffle) and held in memory before any clock starts, then handed to each
library in its own input form (a dict of numpy columns for DeepCTR-Torch's `fit`, a dict of tensors per batch
for FuxiCTR's `train_step`). The clock is the process CPU time of the training loop alone: reading and
converting the data are outside it for every contender.

Contenders (per model and training seed, run one after the other in one process):
- bare: the loop a PyTorch user writes (`step_profile.Bare`);
- trainer, fused: ctrnas's Trainer as `step_profile.make` builds it, with sparse table updates and with
  `embedding_update: fused` (the tables in one FBGEMM TBE with exact Adagrad fused into the backward);
- deepctr: DeepCTR-Torch's `DCN` with `cross_parameterization="matrix"` (DCN-M, i.e. DCN-v2), trained by its
  `fit` (DeepCTR-Torch has no DLRM);
- fuxictr: FuxiCTR's model-zoo `DCNv2` (parallel) and `DLRM`, trained by its `train_step` (what its
  `train_epoch` runs per batch, without the end-of-epoch validation and checkpoint).

FuxiCTR's pip package holds the library but not its model zoo: --fuxictr-zoo names a checkout of
github.com/reczoo/FuxiCTR (model_zoo/DCNv2/src/DCNv2.py, model_zoo/DLRM/src/DLRM.py are imported from it).

Usage: python benchmarks/peers.py [--data runs/data/synthetic-criteo-300k] [--models dcnv2,dlrm]
           [--seeds 0,1] [--contenders bare,trainer,fused,deepctr,fuxictr] [--fuxictr-zoo PATH]
           [--json benchmarks/out/peers.json] [--append] [--out benchmarks/sections/peers.md]
       python benchmarks/peers.py --render benchmarks/out/peers.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import math
import platform
import shlex
import sys
import tempfile
import time
from collections import OrderedDict
from importlib import metadata
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import notes_marker, publish, save  # noqa: E402
from step_profile import evaluate, make  # noqa: E402

from ctrnas.data.dataset import load_schema, read_meta  # noqa: E402
from ctrnas.train.batches import dataset_batches  # noqa: E402
from ctrnas.train.config import TrainConfig  # noqa: E402

# the baselines' widths (ctrnas/train/baselines): DCN-v2 3 cross layers beside an MLP 400-400; DLRM bottom MLP
# 64 -> dim, top MLP 256-128 -> 1
DCN_CROSS, DCN_HIDDEN = 3, (400, 400)
DLRM_BOTTOM, DLRM_TOP = (64,), (256, 128)
LIBRARY = {"bare": "PyTorch", "trainer": "ctrnas", "fused": "ctrnas", "deepctr": "deepctr-torch",
           "fuxictr": "fuxictr"}


# -- the rows, in each library's form ------------------------------------------------------------------------
def columns(batch, schema) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dense [B, n_dense] float32, ids [B, F] int64, labels [B] float32) of a ctrnas batch."""
    f = len(schema.sparse)
    ids = batch.sparse_features.values().view(f, -1).t()
    return batch.dense_features.numpy(), ids.numpy(), batch.labels.numpy()


def epoch_batches(data: Path, split: str, batch_size: int, seed: int | None, limit: int | None) -> list:
    """The split's batches as ctrnas's loader yields them (seeded shuffle when `seed` is given), held in memory;
    the first `limit` rows' worth when given."""
    src = dataset_batches(data, split, batch_size, shuffle=seed is not None, seed=seed or 0)
    out, rows = [], 0
    for b in src.batches():
        out.append(b)
        rows += b.labels.shape[0]
        if limit and rows >= limit:
            break
    return out


def stacked(batches, schema):
    cols = [columns(b, schema) for b in batches]
    return tuple(np.concatenate([c[i] for c in cols]) for i in range(3))


def log_loss(p: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(p.astype(np.float64).reshape(-1), 1e-7, 1 - 1e-7)
    y = y.astype(np.float64).reshape(-1)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


# -- ctrnas and the bare loop ---------------------------------------------------------------------------------
def run_ctrnas(kind: str, variant: str, data: Path, cfg: TrainConfig, batches: list) -> tuple[float, float]:
    """(CPU seconds of the epoch's steps, test log loss): step_profile's contender over in-memory batches."""
    r = make(kind, variant, load_schema(data), cfg)
    r.model.train()
    c0 = time.process_time()
    for b in batches:
        r.train_step(b, len(batches))
    cpu = time.process_time() - c0
    return cpu, evaluate(r.model, data)


# -- DeepCTR-Torch --------------------------------------------------------------------------------------------
def run_deepctr(kind: str, schema, cfg: TrainConfig, train, test) -> tuple[float, float]:
    """DCN-M (DCN-v2's full-rank cross) trained by DeepCTR-Torch's own fit on the rows in the epoch's order
    (shuffle=False: the order is already the seeded one). No L2 terms, no dropout; Adagrad as ctrnas's."""
    if kind != "dcnv2":
        raise ValueError(f"deepctr-torch has no {kind}")
    from deepctr_torch.inputs import DenseFeat, SparseFeat
    from deepctr_torch.models import DCN

    feats = [SparseFeat(f.name, f.cardinality, embedding_dim=cfg.embedding_dim) for f in schema.sparse] + \
        [DenseFeat(n, 1) for n in schema.dense]
    # the linear (wide) part off: ctrnas's DCN-v2 has none
    model = DCN([], feats, cross_num=DCN_CROSS, cross_parameterization="matrix", dnn_hidden_units=DCN_HIDDEN,
                l2_reg_linear=0, l2_reg_embedding=0, l2_reg_cross=0, l2_reg_dnn=0, dnn_dropout=0, seed=cfg.seed,
                device="cpu")
    model.compile(torch.optim.Adagrad(model.parameters(), lr=cfg.lr, eps=cfg.eps), "binary_crossentropy")

    def as_x(dense, ids):
        x = {f.name: ids[:, i] for i, f in enumerate(schema.sparse)}
        x.update({n: dense[:, i] for i, n in enumerate(schema.dense)})
        return x

    x, y = as_x(train[0], train[1]), train[2]
    c0 = time.process_time()
    model.fit(x, y, batch_size=cfg.batch_size, epochs=1, verbose=0, shuffle=False)
    cpu = time.process_time() - c0
    p = model.predict(as_x(test[0], test[1]), batch_size=4096)
    return cpu, log_loss(p, test[2])


# -- FuxiCTR --------------------------------------------------------------------------------------------------
def fuxictr_class(zoo: Path, name: str):
    path = zoo / "model_zoo" / name / "src" / f"{name}.py"
    if not path.exists():
        raise SystemExit(f"{path}: not found; --fuxictr-zoo names a checkout of github.com/reczoo/FuxiCTR "
                         "(its model zoo is not in the fuxictr pip package)")
    spec = importlib.util.spec_from_file_location(f"fuxictr_zoo_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)


def fuxictr_map(schema, dim: int, folder: str):
    """A FuxiCTR FeatureMap of the schema: numeric dense fields, categorical sparse ones (vocab = cardinality,
    the ids as they are), one binary label. FuxiCTR embeds a numeric field as Linear(1, width): width 1 makes
    DCN-v2's input [scaled dense values | embeddings], as wide as ctrnas's (13 + 26 x 16, not 39 x 16)."""
    from fuxictr.features import FeatureMap

    fm = FeatureMap("peers", folder)
    fm.labels, fm.default_emb_dim = ["label"], dim
    fm.features = OrderedDict([(n, {"source": "", "type": "numeric", "embedding_dim": 1}) for n in schema.dense] +
                              [(f.name, {"source": "", "type": "categorical", "vocab_size": f.cardinality})
                               for f in schema.sparse])
    fm.num_fields = fm.get_num_fields()
    fm.set_column_index()
    return fm


def fuxictr_batches(batches, schema) -> list[dict]:
    out = []
    for b in batches:
        dense, ids, labels = columns(b, schema)
        # numeric fields [B, 1], as FuxiCTR's DLRM concatenates them
        d = {n: torch.from_numpy(dense[:, i:i + 1].copy()) for i, n in enumerate(schema.dense)}
        d.update({f.name: torch.from_numpy(ids[:, i].copy()) for i, f in enumerate(schema.sparse)})
        d["label"] = torch.from_numpy(labels.copy())
        out.append(d)
    return out


def run_fuxictr(kind: str, schema, cfg: TrainConfig, zoo: Path, batches, test) -> tuple[float, float]:
    """FuxiCTR's model-zoo model trained by its own train_step (zero_grad, forward, BCE on the sigmoid output,
    backward, clipping of all parameters, step) over the same batches; Adagrad with ctrnas's lr and eps (FuxiCTR
    builds its optimizer by name with the lr only: the eps is set by replacing it), clipping at ctrnas's norm."""
    logging.getLogger().setLevel(logging.WARNING)
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    with tempfile.TemporaryDirectory() as tmp:
        fm = fuxictr_map(schema, cfg.embedding_dim, tmp)
        common = dict(gpu=-1, learning_rate=cfg.lr, embedding_dim=cfg.embedding_dim, optimizer="Adagrad",
                      loss="binary_crossentropy", verbose=0, model_root=tmp, metrics=["logloss"])
        if kind == "dcnv2":
            model = fuxictr_class(zoo, "DCNv2")(fm, model_structure="parallel", num_cross_layers=DCN_CROSS,
                                                parallel_dnn_hidden_units=list(DCN_HIDDEN), **common)
        else:
            model = fuxictr_class(zoo, "DLRM")(fm, bottom_mlp_units=list(DLRM_BOTTOM),
                                               top_mlp_units=list(DLRM_TOP), **common)
    model.optimizer = torch.optim.Adagrad(model.parameters(), lr=cfg.lr, eps=cfg.eps)
    model._max_gradient_norm = cfg.clip_norm  # fit(max_gradient_norm=...) sets it
    model._batch_index = 0
    model.train()
    c0 = time.process_time()
    for b in batches:
        model.train_step(b).item()  # train_epoch sums loss.item()
    cpu = time.process_time() - c0
    model.eval()
    with torch.no_grad():
        p = np.concatenate([model(b)["y_pred"].numpy() for b in test])
    return cpu, log_loss(p, np.concatenate([b["label"].numpy() for b in test]))


# -- one seed -------------------------------------------------------------------------------------------------
def run_seed(data: Path, models: list[str], contenders: list[str], base: TrainConfig, zoo: Path | None,
             limit: int | None, keep) -> None:
    """Every contender of every model on one seed's batches, in turn; `keep(result)` after each."""
    schema = load_schema(data)
    batches = epoch_batches(data, "train", base.batch_size, base.seed, limit)
    test_batches = epoch_batches(data, "test", 4096, None, None)
    rows = sum(b.labels.shape[0] for b in batches)
    for kind in models:
        for spec in contenders:
            c, _, lr = spec.partition("@")  # "fuxictr@0.01": that contender at that learning rate
            cfg = TrainConfig(**{**base.__dict__, "lr": float(lr) if lr else base.lr})
            if c == "deepctr" and kind != "dcnv2":
                continue  # no DLRM in DeepCTR-Torch
            if c in ("bare", "trainer", "fused"):
                cpu, ll = run_ctrnas(kind, c, data, cfg, batches)
            elif c == "deepctr":
                cpu, ll = run_deepctr(kind, schema, cfg, stacked(batches, schema), stacked(test_batches, schema))
            elif c == "fuxictr":
                if zoo is None:
                    raise SystemExit("--fuxictr-zoo: a checkout of github.com/reczoo/FuxiCTR is needed for fuxictr")
                cpu, ll = run_fuxictr(kind, schema, cfg, zoo, fuxictr_batches(batches, schema),
                                      fuxictr_batches(test_batches, schema))
            else:
                raise SystemExit(f"unknown contender {c!r}")
            r = {"model": kind, "contender": c, "lr": cfg.lr, "seed": cfg.seed, "rows": rows, "cpu_s": cpu,
                 "rows_per_cpu_s": rows / cpu, "test_logloss": ll}
            print(f"  {kind} {c} lr {cfg.lr:g} seed {cfg.seed}: {rows:,} rows, {cpu:.1f} CPU-s, "
                  f"{r['rows_per_cpu_s']:,.0f} rows/CPU-s, test log loss {ll:.5f}", flush=True)
            keep(r)


def key(r: dict) -> tuple:
    return r["model"], r["contender"], r["lr"], r["seed"]


def versions() -> dict:
    out = {"python": platform.python_version()}
    for p in ("torch", "torchrec", "fbgemm-gpu", "deepctr-torch", "fuxictr", "numpy"):
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = None
    return out


# -- report ---------------------------------------------------------------------------------------------------
NAMES = {"bare": "bare PyTorch loop", "trainer": "ctrnas trainer (sparse tables)",
         "fused": "ctrnas trainer, `embedding_update: fused`", "deepctr": "DeepCTR-Torch `DCN` (matrix)",
         "fuxictr": "FuxiCTR model zoo"}


def markdown(res: dict) -> str:
    a, meta, v = res["args"], res["meta"], res["versions"]
    source = " ".join(filter(None, [meta["source"].get("kind"), meta["source"].get("profile")]))  # synthetic criteo
    lines = ["## ctrnas against a bare loop and the peer libraries (`benchmarks/peers.py`)", "",
             f"Command: `{a['command']}`", "",
             f"Data: {source} profile, "
             f"{meta['source']['rows']:,} rows, train {meta['splits']['train']['rows']:,} / test "
             f"{meta['splits']['test']['rows']:,}; one epoch over the training split"
             + (f" (its first {a['limit']:,} rows)" if a.get("limit") else "")
             + f", batch {a['batch_size']}, torch threads 1. Versions: "
             + ", ".join(f"{k} {x}" for k, x in v.items() if x) + f". Machine: {a['machine']}.", "",
             "Rows per CPU-second: rows trained / process CPU time of the training loop alone (every contender "
             "gets the same batches, read and converted to its input form before the clock starts); "
             "vs bare = the contender's rows/CPU-s / the bare loop's of the same model and seed. Test log loss "
             "after the epoch.", "",
             "| model | contender | lr | seed | rows | CPU s | rows/CPU-s | vs bare | test log loss |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    runs = res["runs"]
    bare = {(r["model"], r["seed"]): r for r in runs if r["contender"] == "bare"}
    order = {c: i for i, c in enumerate(NAMES)}
    for r in sorted(runs, key=lambda r: (r["model"], r["seed"], order.get(r["contender"], 9), -r["lr"])):
        ref = bare.get((r["model"], r["seed"]))
        ratio = f"{r['rows_per_cpu_s'] / ref['rows_per_cpu_s']:.2f}x" if ref else "-"
        lines.append(f"| {r['model']} | {NAMES.get(r['contender'], r['contender'])} | {r['lr']:g} | {r['seed']} | "
                     f"{r['rows']:,} | {r['cpu_s']:.1f} | {r['rows_per_cpu_s']:,.0f} | {ratio} | "
                     f"{r['test_logloss']:.5f} |")
    lines += ["", "Over the seeds (means; ratios are means of the per-seed ratios; vs ctrnas (fused) = the "
              "contender's rows/CPU-s / the fused trainer's; a run whose test log loss is above ln 2, worse than "
              "predicting 0.5 for every row, diverged: it is counted, and left out of the mean log loss):", "",
              "| model | contender | lr | seeds | rows/CPU-s | vs bare | vs ctrnas (fused) | test log loss | "
              "diverged |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    groups: dict[tuple, list] = {}
    for r in runs:
        groups.setdefault((r["model"], r["contender"], r["lr"]), []).append(r)
    for (m, c, lr), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9), -kv[0][2])):
        def vs(name):
            refs = [(r, g) for r in rs for g in runs if g["contender"] == name and g["model"] == m
                    and g["seed"] == r["seed"] and g["lr"] == a["lr"]]
            return f"{np.mean([r['rows_per_cpu_s'] / g['rows_per_cpu_s'] for r, g in refs]):.2f}x" if refs else "-"
        trained = [r["test_logloss"] for r in rs if r["test_logloss"] <= math.log(2)]
        ll = f"{np.mean(trained):.5f}" if trained else "-"
        lines.append(f"| {m} | {NAMES.get(c, c)} | {lr:g} | {len(rs)} | "
                     f"{np.mean([r['rows_per_cpu_s'] for r in rs]):,.0f} | {vs('bare')} | {vs('fused')} | {ll} | "
                     f"{len(rs) - len(trained)} |")
    if "dlrm" in {r["model"] for r in runs}:
        lines += ["", "DeepCTR-Torch has no DLRM (its model list has DCN, DCN-Mix, DeepFM, xDeepFM, AutoInt and "
                  "others, no DLRM), so it appears for DCN-v2 only."]
    lines += ["", "The contenders, matched as far as each library allows (embedding dim 16; DCN-v2: "
              f"{DCN_CROSS} full-rank cross layers beside an MLP {'-'.join(map(str, DCN_HIDDEN))} on "
              "[dense | embeddings], parallel; DLRM: bottom MLP "
              f"{'-'.join(map(str, DLRM_BOTTOM))}-16, dot interaction, top MLP {'-'.join(map(str, DLRM_TOP))}-1; "
              "Adagrad eps 1e-2 at the lr of the row):", "",
              "- bare PyTorch loop and ctrnas trainer: `step_profile.Bare` / `step_profile.make` (torchrec tables "
              "with row-sparse gradients, or one FBGEMM TBE with Adagrad fused into the backward; warm-up then "
              "cosine schedule; clipping of the dense part at norm 5; the model outputs a logit, BCE with logits).",
              "- DeepCTR-Torch: `DCN(cross_parameterization=\"matrix\")` (DCN-M = DCN-v2's cross "
              "x0 * (W x + b) + x), the linear (wide) part, L2 terms and dropout off, dense fields as `DenseFeat` "
              "(the input is 13 + 26 x 16 wide, as ctrnas's); trained by its `fit` (its DataLoader over the rows "
              "in the epoch's order, shuffle off) with `torch.optim.Adagrad` passed to `compile`. Its loop: "
              "dense gradients for the tables (`nn.Embedding`), the loss summed over the batch, no clipping, no "
              "schedule.",
              "- FuxiCTR: the model zoo's `DCNv2` (`model_structure=\"parallel\"`) and `DLRM`, trained by "
              "`BaseModel.train_step` per batch (what `train_epoch` runs, without its end-of-epoch validation "
              "and checkpoint). FuxiCTR builds its optimizer by name with the lr alone, so the Adagrad is "
              "replaced by one with eps 1e-2; `max_gradient_norm` 5 (`fit`'s argument), applied to all "
              "parameters, tables included. Numeric fields are embedded FuxiCTR's way, `Linear(1, width)`, with "
              "width 1 so DCN-v2's input is as wide as ctrnas's. Tables with dense gradients, sigmoid output "
              "and BCE, constant lr, Xavier-normal init of the linear layers."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT / "runs" / "data" / "synthetic-criteo-300k"))
    ap.add_argument("--models", default="dcnv2,dlrm")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--contenders", default="bare,trainer,fused,deepctr,fuxictr")
    ap.add_argument("--fuxictr-zoo", default=None, help="a checkout of github.com/reczoo/FuxiCTR")
    ap.add_argument("--limit", type=int, default=None, help="train on the epoch's first LIMIT rows only")
    ap.add_argument("--lr", type=float, default=0.12)
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--machine", default="x86_64, 2 CPU cores shared with other jobs, no GPU")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "out" / "peers.json"))
    ap.add_argument("--append", action="store_true", help="add to the results already in --json")
    ap.add_argument("--render", default=None, help="a --json file: rewrite --out from it, no runs")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "sections" / "peers.md"))
    args = ap.parse_args(argv)
    command = shlex.join(["python", "benchmarks/peers.py", *(sys.argv[1:] if argv is None else argv)])
    if args.render:  # the commands that measured, then this one
        res = json.loads(Path(args.render).read_text())
        res["args"]["command"] = "; ".join(res["commands"] + [command])
    else:
        torch.set_num_threads(1)
        data = Path(args.data)
        prev = Path(args.json)
        res = json.loads(prev.read_text()) if args.append and prev.exists() else {"commands": [], "runs": []}
        res["meta"], res["versions"] = read_meta(data), versions()
        res["commands"].append(command)
        res["args"] = {**{k: x for k, x in vars(args).items() if k not in ("render", "append")},
                       "command": "; ".join(res["commands"])}
        cfg = TrainConfig(lr=args.lr, batch_size=args.batch_size, seed=0, progress=False, threads=1,
                          embedding_update="sparse")  # "trainer": sparse tables; "fused" is its own contender
        zoo = Path(args.fuxictr_zoo) if args.fuxictr_zoo else None

        def keep(r):  # a rerun of a (model, contender, seed) replaces its result
            res["runs"] = [x for x in res["runs"] if key(x) != key(r)] + [r]
            save(prev.parent, prev.stem, res)
        for seed in [int(s) for s in args.seeds.split(",") if s]:
            c = TrainConfig(**{**cfg.__dict__, "seed": seed})
            run_seed(data, args.models.split(","), args.contenders.split(","), c, zoo, args.limit, keep)
    publish(markdown(res), Path(args.out), notes_marker("peers.py"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
