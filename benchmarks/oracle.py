"""Room beyond the baselines on a synthetic profile: its click model's own form, with every parameter learned.

    .venv/bin/python benchmarks/oracle.py --rows 1000000 --train-seeds 4

The generator (`ctrnas.data.synthetic`) writes the logit as a sum of components, each a known function of a
few fields and counts with unknown tables. `OracleForm` is that sum with the same fields, pairs, triples,
gates and dense terms, each component on tables of its own (`--rank` wide; `--shared`: one table per field
for all, as every arch of the search space has), learned from the profile's training rows by the trainer and
settings that train the suite's baselines. No arch of the search space knows which fields, pairs and forms
matter, so where this form, trained as well as the baselines are, is not below the best baseline by more than
the seed noise, a search has no evidence of room to win there. It is not a bound: a form whose products
train badly (three-table products, kdd2012-crosses) can end above the baselines; the report shows it.

Every training is cached in the suite's trainings file (`benchmarks/out/suite-<rows>k/<profile>`), beside
the baselines it is compared with (`benchmarks/suite.py --methods baselines`); the section goes to
benchmarks/sections/oracle.md. `--drop` leaves components out (what each is worth).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import _results  # noqa: E402
import suite  # noqa: E402
from ctrnas.data.synthetic import COMPONENTS, build, make_settings  # noqa: E402
from ctrnas.supernet.stem import EmbeddingStem  # noqa: E402
from ctrnas.train.baselines import build_baseline  # noqa: E402
from ctrnas.train.baselines.common import FirstOrder, flat_input  # noqa: E402
from ctrnas.train.baselines.xdeepfm import XDeepFM  # noqa: E402

NOTES = _results.notes_marker("oracle.py")


class _Tables(nn.Module):
    """One `EmbeddingStem` of width `dim` holding tables for `fields` only (the others get width 0)."""

    def __init__(self, schema, fields, dim: int, row_cap, std: float):
        super().__init__()
        self.fields = sorted(set(int(f) for f in fields))
        widths = [dim if f in self.fields else 0 for f in range(len(schema.sparse))]
        self.stem = EmbeddingStem(schema, dim, row_cap, widths=widths)
        with torch.no_grad():
            for w in self.stem.embedding_parameters():
                w.normal_(0.0, std)

    def forward(self, kjt) -> torch.Tensor:
        return self.stem(kjt)  # [B, F, dim]; fields without a table are zero

    @torch.no_grad()
    def set(self, values: dict) -> None:
        """Table of field f <- values[f] ([rows] or [rows, dim])."""
        for f, w in zip(self.fields, self.stem.embedding_parameters()):
            w.copy_(torch.as_tensor(values[f], dtype=w.dtype).reshape(w.shape))


class OracleForm(nn.Module):
    """logit = bias + sum of the click model's active components, each in its own form with learned tables."""

    def __init__(self, schema, click, row_cap=None, std: float = 0.02, rank: int | None = None, drop=(),
                 shared: bool = False):
        super().__init__()
        s, D = click.settings, schema.dense_dim
        r = self.rank = rank or s.rank  # the generator's code width, or wider (easier to fit)
        on = {c for c, v in click.scale.items() if v > 0 and c not in drop}
        self.on = on
        self.register_buffer("t_mean", torch.tensor(click.t_mean, dtype=torch.float32))
        self.register_buffer("t_std", torch.tensor(click.t_std, dtype=torch.float32))
        self.first = FirstOrder(schema, row_cap)  # bias + linear counts + first order
        self.signal = sorted(int(f) for f in click.signal)
        if len(self.signal) < len(schema.sparse):  # noise fields get no first-order table (their weights are 0)
                self.first.weights = EmbeddingStem(schema, 1, row_cap,
                                               widths=[int(f in self.signal) for f in range(len(schema.sparse))])
        # `shared`: every r-wide component reads one table per field, as a baseline's single embedding does
        one = _Tables(schema, range(len(schema.sparse)), r, row_cap, std) if shared else None

        def tables(fields):
            return one if shared else _Tables(schema, fields, r, row_cap, std)

        self.shared = shared
        if "dense" in on:  # a sum of tanh ridges per count
            self.ridge_a = nn.Parameter(torch.randn(D, 3))
            self.ridge_c = nn.Parameter(torch.randn(D, 3) * 0.5)
            self.ridge_w = nn.Parameter(torch.randn(D, 3) * 0.1)
        if "pairwise" in on:
            self.pairs = [tuple(p) for p in click.pairs]
            self.v = tables([f for p in self.pairs for f in p])
        if "triple" in on:
            self.triples = [tuple(int(f) for f in t) for t in click.triples]
            self.vt = tables([f for t in self.triples for f in t])
        if "mlp" in on:
            self.mlp_fields = [int(f) for f in click.mlp_fields]
            self.u = tables(self.mlp_fields)
            self.mlp = nn.Sequential(nn.Linear(r * len(self.mlp_fields) + D, s.mlp_hidden), nn.Tanh(),
                                     nn.Linear(s.mlp_hidden, 1))
        if "gate" in on:  # per gate: q at the gate field, e at the gated field
            self.gates = [(int(g), int(h), int(j)) for g, h, j, _, _ in click.gates]
            self.gate_tables = nn.ModuleList(_Tables(schema, [g, h], 1, row_cap, std) for g, h, _ in self.gates)
            self.gate_ab = nn.Parameter(torch.tensor([[3.0, 3.0, 0.0]] * len(self.gates)))
        if "bilinear" in on:
            self.bpairs = [tuple(p) for p in click.bpairs]
            self.b = tables([f for p in self.bpairs for f in p])
            self.m = nn.Parameter(torch.randn(len(self.bpairs), r, r) / r)
        if "dense_cat" in on:
            self.cat_fields = list(click.cat_fields)
            self.d = tables(self.cat_fields)
            self.phi = nn.Linear(D, r)
        if "dense_product" in on:
            self.dpairs = [tuple(p) for p in click.dpairs]
            self.dp_w = nn.Parameter(torch.zeros(len(self.dpairs)))
        if "high_order" in on:
            self.hterms = [(tuple(int(f) for f in fs), int(j)) for fs, j in click.hterms]
            self.sc = _Tables(schema, [f for fs, _ in self.hterms for f in fs], 1, row_cap, std)
            self.h_ab = nn.Parameter(torch.tensor([[1.0, 0.0]] * len(self.hterms)))

    @torch.no_grad()
    def load_truth(self, click) -> None:
        """Set every parameter to the click model's own (its scales folded in), so the logit is the generator's:
        the check that this form can represent the truth exactly (tests/test_benchmark_oracle.py)."""
        import numpy as np

        if self.rank != click.settings.rank:
            raise ValueError(f"the truth has width {click.settings.rank}, this form {self.rank}")
        if self.shared:
            raise ValueError("one shared table per field cannot hold every term's own codes")
        sc = click.scale

        def t(x):
            return torch.as_tensor(np.asarray(x), dtype=torch.float32)

        weights = self.first.weights.embedding_parameters()
        for f, w in zip(self.signal, weights):
            w.copy_(t(click.w[f] * sc["first_order"]).reshape(w.shape))
        if self.first.dense is not None:
            self.first.dense.weight.zero_()
            self.first.dense.bias.zero_()
        self.first.bias.fill_(click.bias - sum(sc[c] * click.center[c] for c in COMPONENTS))
        if "dense" in self.on:
            self.ridge_a.copy_(t(click.ridge_s))
            self.ridge_c.copy_(t(click.ridge_c))
            self.ridge_w.copy_(t(click.ridge_a * sc["dense"]))
        if "pairwise" in self.on:
            self.v.set({f: click.v[f] * sc["pairwise"] ** 0.5 for f in self.v.fields})
        if "triple" in self.on:
            self.vt.set({f: click.vt[f] * sc["triple"] ** (1 / 3) for f in self.vt.fields})
        if "mlp" in self.on:
            self.u.set({f: click.u[f] for f in self.u.fields})
            self.mlp[0].weight.copy_(t(click.w1.T))
            self.mlp[0].bias.copy_(t(click.b1))
            self.mlp[2].weight.copy_(t(click.w2[None] * sc["mlp"]))
            self.mlp[2].bias.zero_()
        if "gate" in self.on:
            for tab, ab, (g, h, _, q, e) in zip(self.gate_tables, self.gate_ab, click.gates):
                tab.set({g: q, h: e * sc["gate"]})
                ab.copy_(torch.tensor([3.0, 3.0, 0.0]))
        if "bilinear" in self.on:
            self.b.set({f: click.b[f] for f in self.b.fields})
            self.m.copy_(t(np.stack([click.m[p] * sc["bilinear"] for p in click.bpairs])))
        if "dense_cat" in self.on:
            self.d.set({f: click.d[f] * sc["dense_cat"] for f in self.d.fields})
            self.phi.weight.copy_(t(click.cat_a.T))
            self.phi.bias.copy_(t(click.cat_c))
        if "dense_product" in self.on:
            self.dp_w.fill_(sc["dense_product"])
        if "high_order" in self.on:
            self.sc.set({f: click.sc[f] * sc["high_order"] ** (1 / 3) for f in self.sc.fields})
            self.h_ab.copy_(torch.tensor([[1.0, 0.0]] * len(self.hterms)))

    def forward(self, dense: torch.Tensor, kjt) -> torch.Tensor:
        t = (dense - self.t_mean) / self.t_std
        out = self.first(dense, kjt)
        if "dense" in self.on:
            out = out + (self.ridge_w * torch.tanh(self.ridge_a * (t[:, :, None] - self.ridge_c))).sum((1, 2))
        if "pairwise" in self.on:
            v = self.v(kjt)
            out = out + sum((v[:, f] * v[:, g]).sum(1) for f, g in self.pairs)
        if "triple" in self.on:
            v = self.vt(kjt)
            out = out + sum((v[:, f] * v[:, g] * v[:, h]).sum(1) for f, g, h in self.triples)
        if "mlp" in self.on:
            u = self.u(kjt)
            out = out + self.mlp(torch.cat([u[:, f] for f in self.mlp_fields] + [t], 1)).squeeze(1)
        if "gate" in self.on:
            for (g, h, j), tab, ab in zip(self.gates, self.gate_tables, self.gate_ab):
                x = tab(kjt)[:, :, 0]
                out = out + torch.sigmoid(ab[0] * x[:, g] + ab[1] * t[:, j] + ab[2]) * x[:, h]
        if "bilinear" in self.on:
            b = self.b(kjt)
            out = out + sum(torch.einsum("bk,kl,bl->b", b[:, f], m, b[:, g]) for (f, g), m in zip(self.bpairs, self.m))
        if "dense_cat" in self.on:
            d, phi = self.d(kjt), torch.tanh(self.phi(t))
            out = out + sum((phi * d[:, f]).sum(1) for f in self.cat_fields)
        if "dense_product" in self.on:
            out = out + sum(w * t[:, i] * t[:, j] for w, (i, j) in zip(self.dp_w, self.dpairs))
        if "high_order" in self.on:
            sc = self.sc(kjt)[:, :, 0]
            out = out + sum(sc[:, f] * sc[:, g] * sc[:, h] * (ab[0] * t[:, j] + ab[1])
                            for ((f, g, h), j), ab in zip(self.hterms, self.h_ab))
        return out


class _DenseByField(nn.Module):
    """sum_f <phi(counts), e_f>: a DLRM-style dense-by-field term straight into the logit. phi, `bottom`:
    "relu" (DLRM's bottom MLP, 64-128 hidden), "linear" (one linear map of the counts), "tanh" (one linear map
    then tanh: the generator's own form of its dense-by-category term) or "tanh-mlp" (64 tanh units, linear out)."""

    def __init__(self, schema, dim: int, row_cap, bottom: str = "relu"):
        super().__init__()
        self.stem = EmbeddingStem(schema, dim, row_cap)
        D = schema.dense_dim
        self.bottom = {
            "relu": lambda: nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Linear(64, 128), nn.ReLU(),
                                          nn.Linear(128, dim)),
            "linear": lambda: nn.Linear(D, dim),
            "tanh": lambda: nn.Sequential(nn.Linear(D, dim), nn.Tanh()),
            "tanh-mlp": lambda: nn.Sequential(nn.Linear(D, 64), nn.Tanh(), nn.Linear(64, dim)),
        }[bottom]()

    def forward(self, dense, kjt):
        return (self.bottom(dense)[:, None, :] * self.stem(kjt)).sum((1, 2))


class TwoSets(nn.Module):
    """Two models' logits summed, on two table sets (one per model, Guo et al. 2023's multi-embedding) or,
    `shared`, the second reading the first's tables: does a second table set per field pay?"""

    def __init__(self, first: nn.Module, second: nn.Module, shared: bool):
        super().__init__()
        self.first, self.second = first, second
        if shared:
            self.second.stem = self.first.stem

    def forward(self, dense, kjt):
        return self.first(dense, kjt) + self.second(dense, kjt)


class XDeepFMTwoSets(nn.Module):
    """xDeepFM with its CIN and its deep part on separate table sets."""

    def __init__(self, schema, dim: int, row_cap):
        super().__init__()
        self.x = XDeepFM(schema, dim, row_cap)
        self.deep_stem = EmbeddingStem(schema, dim, row_cap)

    def forward(self, dense, kjt):
        x = self.x
        return (x.linear(dense, kjt) + x.cin_out(x.cin(x.stem(kjt))).squeeze(1)
                + x.deep(flat_input(dense, self.deep_stem(kjt))).squeeze(1))


class _CountsMLP(nn.Module):
    """An MLP over the counts alone (their ridges and products), no tables."""

    def __init__(self, schema):
        super().__init__()
        self.stem = None  # nothing to share
        self.net = nn.Sequential(nn.Linear(schema.dense_dim, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                                 nn.Linear(64, 1))

    def forward(self, dense, kjt):
        return self.net(dense).squeeze(1)


class _FwFM(nn.Module):
    """Field-weighted FM (Pan et al. 2018, "Field-weighted Factorization Machines"): the first-order term plus
    sum_{f<g} r_fg <v_f, v_g>, one learned weight per field pair (starting at 1, FM itself): a pair term that
    can learn which pairs carry signal, where FM on every pair cannot."""

    def __init__(self, schema, dim: int, row_cap):
        super().__init__()
        self.linear = FirstOrder(schema, row_cap)
        self.stem = EmbeddingStem(schema, dim, row_cap)
        n = len(schema.sparse_names)
        i, j = torch.triu_indices(n, n, offset=1)
        self.register_buffer("pairs", i * n + j, persistent=False)
        self.r = nn.Parameter(torch.ones(len(self.pairs)))

    def forward(self, dense, kjt):
        v = self.stem(kjt)
        dots = torch.bmm(v, v.transpose(1, 2)).flatten(1).index_select(1, self.pairs)
        return self.linear(dense, kjt) + dots @ self.r


def _pair(first, second, shared=False):
    return lambda schema, row_cap, seed: TwoSets(first(schema, row_cap, seed), second(schema, row_cap, seed), shared)


def _baseline(name: str, dim: int = 16):
    return lambda schema, row_cap, seed: build_baseline(name, schema, dim, row_cap, seed=seed)


def _dense_by_field_with(bottom: str):
    return lambda schema, row_cap, seed: _DenseByField(schema, 16, row_cap, bottom)


_dense_by_field = _dense_by_field_with("relu")


def _counts_mlp(schema, row_cap, seed):
    return _CountsMLP(schema)


def _tables_at(build, std: float):
    """`build`'s model with every vector table (width > 1; first-order weights keep theirs) drawn from
    N(0, std), the form's own init, in place of TorchRec's uniform(+-1/sqrt(rows))."""
    def made(schema, row_cap, seed):
        model = build(schema, row_cap, seed)
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, EmbeddingStem):
                    for w in m.embedding_parameters():
                        if w.shape[1] > 1:
                            w.normal_(0.0, std)
        return model
    return made


# the hand-built models of the report's probe table (`--probes`): name -> (schema, row_cap, seed) -> model
PROBES = {
    "xdeepfm-32": _baseline("xdeepfm", 32),
    "xdeepfm-two-sets": lambda schema, row_cap, seed: XDeepFMTwoSets(schema, 16, row_cap),
    "xdeepfm+dense-by-field": _pair(_baseline("xdeepfm"), _dense_by_field),
    "xdeepfm+dense-by-field-shared": _pair(_baseline("xdeepfm"), _dense_by_field, shared=True),
    "dlrm+fm": _pair(_baseline("dlrm"), _baseline("fm")),
    "dlrm+fm-shared": _pair(_baseline("dlrm"), _baseline("fm"), shared=True),
    # the form's terms without its field knowledge: FM on every pair, a dense-by-field term on every field
    "fm+dense-by-field": _pair(_pair(_baseline("fm"), _dense_by_field), _counts_mlp),
    "fm+dense-by-field-shared": _pair(_pair(_baseline("fm"), _dense_by_field, shared=True), _counts_mlp),
    # the same with a learned weight per field pair (FwFM) in place of FM: can it learn which pairs matter?
    "fwfm+dense-by-field": _pair(_pair(lambda schema, row_cap, seed: _FwFM(schema, 16, row_cap), _dense_by_field),
                                 _counts_mlp),
    # ... and with other functions of the counts in the dense-by-field term (tanh: the generator's own form)
    **{f"fm+dense-by-field-{b}": _pair(_pair(_baseline("fm"), _dense_by_field_with(b)), _counts_mlp)
       for b in ("linear", "tanh", "tanh-mlp")},
    # the tables at the form's init (N(0, 0.02)): is that what the form has over the baselines?
    "fm+dense-by-field~std0.02": _tables_at(_pair(_pair(_baseline("fm"), _dense_by_field), _counts_mlp), 0.02),
    "xdeepfm~std0.02": _tables_at(_baseline("xdeepfm"), 0.02),
}


def _probe(name: str, schema, row_cap, seed: int) -> nn.Module:
    return PROBES[name](schema, row_cap, seed)


def click_model(data):
    """The generator's click model of a synthetic data folder, rebuilt from its meta.json."""
    meta = data.meta
    settings = dict(meta["settings"])
    settings["split"] = tuple(settings["split"])
    return build(meta["source"]["profile"], meta["source"]["seed"], make_settings(**settings))[1]


def _variant(args) -> str:
    return (f"std{args.std}" + (f"-r{args.rank}" if args.rank else "") + "".join(f"-no-{c}" for c in args.drop)
            + ("-shared" if args.shared else ""))


def run(args, profile: str, cache) -> None:
    from ctrnas import api

    recipe = suite.recipe_for(args, profile)
    data = api.prepare_data(recipe)
    settings = suite._settings(recipe, data)
    rows = {k: v for k, v in settings["rows"].items() if v is not None}
    click = click_model(data)
    for seed in range(args.train_seeds):
        _train(cache, f"oracle:{_variant(args)}@{seed}:{suite._key(settings)}", profile, "oracle", seed, recipe, data,
               rows, lambda cfg: OracleForm(data.schema, click, cfg.row_cap, std=args.std, rank=args.rank,
                                            drop=args.drop, shared=args.shared))
    for name in args.probes:
        for seed in range(args.train_seeds):
            _train(cache, f"probe:{name}@{seed}:{suite._key(settings)}", profile, name, seed, recipe, data, rows,
                   lambda cfg: _probe(name, data.schema, cfg.row_cap, seed))


def _train(cache, key: str, profile: str, name: str, seed: int, recipe, data, rows: dict, build) -> None:
    """Train `build(cfg)` as the suite trains its baselines at training seed `seed`, unless `key` is cached."""
    from ctrnas.train.run import train_and_test

    if cache.get(key):
        return
    cfg = dataclasses.replace(recipe.final_train, seed=seed, progress=False)
    t0 = time.perf_counter()
    torch.manual_seed(seed)
    model = build(cfg)
    m = train_and_test(model, data.path, cfg, None, name, **rows)
    r = {"model": name, "seed": seed, "test": m["test"]["logloss"], "val": m.get("val", {}).get("logloss"),
         "seconds": time.perf_counter() - t0}
    if isinstance(model, OracleForm):
        r["components"] = sorted(model.on)
    cache.put(key, r)
    print(f"{profile} {name} seed {seed}: test {r['test']:.5f} ({r['seconds']:.0f} s)", flush=True)


def _mean_sd(xs):
    return (statistics.mean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0) if xs else (None, None)


def _cached(args, profile: str) -> tuple[dict, dict, dict]:
    """(baseline -> test log losses, oracle variant -> ..., probe -> ...) from the profile's trainings file."""
    base, orc, probes = {}, {}, {}
    for k, r in suite.Cache(args, profile).data.items():
        if k.startswith("baseline:"):
            base.setdefault(r["model"], []).append(r["test"])
        elif k.startswith("oracle:"):
            orc.setdefault(k[len("oracle:"):k.index("@")], []).append(r["test"])
        elif k.startswith("probe:"):
            probes.setdefault(r["model"], []).append(r["test"])
    return base, orc, probes


def _cell(xs) -> str:
    m, sd = _mean_sd(xs)
    return f"{m:.4f} ({sd:.4f}, {len(xs)})" if len(xs) > 1 else f"{m:.4f} (1 seed)"


def _in_pair_sd(margin: float, base_sd: float, xs) -> str:
    pair = math.hypot(base_sd, _mean_sd(xs)[1])
    return f"{margin / pair:+.1f}" if pair else "-"


def report(args) -> str:
    main = _variant(args)
    lines = [f"## Room beyond the baselines: the click model's own form, learned ({args.rows // 1000}k rows)",
             "",
             "Command: `python benchmarks/oracle.py " + " ".join(a for a in args.argv if a != "--report-only") + "`",
             "",
             f"The oracle form `{main}` (test log loss: mean (sd, training seeds)) against the best baseline of the "
             "suite's cached trainings (`benchmarks/suite.py --methods baselines`); the gap column is the share of "
             "LR's gap to the Bayes optimum the form closes beyond the best baseline; the pair sd column gives the "
             "margin in units of the two models' training-seed sd together (the noise of comparing one training of "
             "each, the unit of the search's own-arch goal).", "",
             "| profile | Bayes optimum | LR | best baseline | oracle form | oracle - best baseline | pair sd | gap |",
             "|---|---|---|---|---|---|---|---|"]
    variants, probes = [], []
    for profile in args.profiles:
        truth = suite._truth(args, profile)
        base, orc, probed = _cached(args, profile)
        variants += [(profile, v, xs) for v, xs in sorted(orc.items())]
        if base:
            best = min(base, key=lambda b: statistics.mean(base[b]))
            bm, bs = _mean_sd(base[best])
            probes += [(profile, p, xs, statistics.mean(xs) - bm, bs) for p, xs in sorted(probed.items())]
        if main not in orc:
            continue
        om = statistics.mean(orc[main])
        if not base:
            lines.append(f"| {profile} | {truth['bayes']:.4f} | - | - (no cached baselines) | {_cell(orc[main])} "
                         "| - | - | - |")
            continue
        lr = statistics.mean(base["lr"]) if "lr" in base else None
        share = f"{100 * (bm - om) / (lr - truth['bayes']):.1f}%" if lr and truth["bayes"] else "-"
        lines.append(f"| {profile} | {truth['bayes']:.4f} | {suite._f(lr)} | {best} {_cell(base[best])} "
                     f"| {_cell(orc[main])} | {om - bm:+.4f} ({(om - bm) / bs if bs else 0:+.1f} sd) "
                     f"| {_in_pair_sd(om - bm, bs, orc[main])} | {share} |")
    lines += ["", "Every variant trained (`std`: the tables' initial sd; `r`: the product tables' width, none: the "
              "generator's 4; `no-X`: component X left out; `shared`: one table per field for all components):", "",
              "| profile | variant | test log loss |", "|---|---|---|"]
    lines += [f"| {p} | {v} | {_cell(xs)} |" for p, v, xs in variants]
    if probes:
        lines += ["", "Probes (`--probes`): hand-built models with a second table set per field, or xDeepFM at "
                  "width 32, against the best baseline:", "",
                  "| profile | probe | test log loss | - best baseline |", "|---|---|---|---|"]
        lines += [f"| {p} | {n} | {_cell(xs)} | {d:+.4f} ({d / bs if bs else 0:+.1f} sd) |"
                  for p, n, xs, d, bs in probes]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--profiles", default="kdd2012-dense-by-category,kdd2012-crosses,kdd2012-dense-gates,"
                                          "kdd2012-deep,avazu-pairwise")
    ap.add_argument("--train-seeds", type=int, default=2)
    ap.add_argument("--std", type=float, default=0.02, help="the learned tables' initial std")
    ap.add_argument("--rank", type=int, default=16,
                    help="the product tables' width (0: the generator's own, 4; wider trains better)")
    ap.add_argument("--drop", default="", help="components to leave out (an ablation: what each is worth)")
    ap.add_argument("--shared", action="store_true", help="one r-wide table per field for every component")
    ap.add_argument("--probes", default="", help=f"hand-built models to train too ({', '.join(PROBES)})")
    ap.add_argument("--recipe", default=suite.RECIPE)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="recipe overrides (as suite.py's)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--section", default=None)
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    args.profiles = [p for p in args.profiles.split(",") if p]
    args.drop = sorted(c for c in args.drop.split(",") if c)
    args.probes = [p for p in args.probes.split(",") if p]
    unknown = sorted(set(args.probes) - set(PROBES))
    if unknown:
        ap.error(f"--probes: unknown {', '.join(unknown)}; known: {', '.join(PROBES)}")
    unknown = sorted(set(args.drop) - set(COMPONENTS))
    if unknown:
        ap.error(f"--drop: unknown {', '.join(unknown)}; known: {', '.join(COMPONENTS)}")
    args.workers = 1
    args.out = Path(args.out or ROOT / f"benchmarks/out/suite-{args.rows // 1000}k")
    if not args.report_only:
        for profile in args.profiles:
            run(args, profile, suite.Cache(args, profile))
    _results.publish(report(args), Path(args.section or ROOT / "benchmarks/sections/oracle.md"), NOTES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
