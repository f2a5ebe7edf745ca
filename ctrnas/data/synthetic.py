"""Synthetic CTR datasets with a known click model, so any model's log loss can be set against the optimum.

Each row's features are drawn with the shape of a real dataset (`synthetic_profiles`); its label is
Bernoulli(p_true) with p_true = sigmoid(logit) and

    logit = bias + first_order + dense + pairwise + triple + mlp + gate

  first_order  sum_f w_f[x_f]                                  per-category weights (what LR can learn)
  dense        sum_j g_j(t_j), g_j a sum of 3 tanh ridges       dense non-linearities
  pairwise     sum_{(f,g) in P} <v_f[x_f], v_g[x_g]>            low-rank (FM-like) interactions on a subset P
  triple       sum_{(f,g,h) in T} sum_k v'_f v'_g v'_h          3-way CP products
  mlp          w2 . tanh(W1 [u_f1..u_fm, t] + b1)              higher-order interactions of a few fields
  gate         sigmoid(3 (q_g[x_g] + t_j)) * e_h[x_h]           one field and a count gate another field's effect
  bilinear     sum_{(f,g) in B} b_f[x_f]^T M_fg b_g[x_g]        a different bilinear map per pair (no shared embedding)
  dense_cat    sum_{f in C} <tanh(A t + c), d_f[x_f]>           counts by categories (DLRM's bottom MLP . embeddings)
  dense_product sum_{(i,j)} t_i t_j                              products of counts
  high_order   sum_k s_f[x_f] s_g[x_g] s_h[x_h] t_j             degree-4 multiplicative crosses

A planted structure (`planted:SEED`, `planted-deep:SEED`) replaces the sum: the logit is an arch of the search
space with random weights (`ctrnas.supernet.planted`, which the caller hands to `generate` as `planted`: this
layer cannot build a network), so the best model is a point of the space that no hand design is.

A named `structure` (`synthetic_profiles.STRUCTURES`) sets the component scales and the field layout (extra
noise fields, the share of fields that carry signal); the default is the demo's click model, and the later
components (bilinear and after, extra gates, noise fields) draw from their own random stream, so the default
structure's data stays what it was before they existed.

Per-category parameters (w, v, v', u, q, e) shrink with the id's frequency rank r as (1 + r/tail_head)^-tail_decay:
rare ids carry little signal, as in real logs, so what separates architectures is learnable in one epoch.
Every component is centred and scaled to a target standard deviation (the settings, in logit units) on a
calibration sample, and the bias is solved so the mean p_true equals the profile's CTR. p_true depends only
on the stored features, so the mean binary entropy of p_true is the Bayes-optimal expected log loss.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

import numpy as np
import pyarrow as pa
from scipy.optimize import brentq
from scipy.special import expit

from ctrnas.data.dataset import SPLITS, DatasetWriter, write_source
from ctrnas.data.schema import DatasetSchema, SparseFeature
from ctrnas.data.ownership import remove_transient
from ctrnas.data.synthetic_profiles import PROFILES, Profile, SparseSpec, get_structure, structure_names
from ctrnas.errors import CtrnasError, PathError, RecipeError
from ctrnas.files import FULL, disk_full
from ctrnas.locks import folder_lock

COMPONENTS = ("first_order", "dense", "pairwise", "triple", "mlp", "gate", "bilinear", "dense_cat", "dense_product",
              "high_order")
_WRITE_ROWS = 65_536  # rows per Parquet row group: the loader shuffles row groups, so keep them small


@dataclass(frozen=True)
class SyntheticSettings:
    """Generator knobs; component scales are target standard deviations of each logit component."""

    cardinality_cap: int = 20_000
    ctr: float | None = None  # None: the profile's base rate
    rank: int = 4
    # calibrated on criteo, 1M rows (data seed 0), one epoch with the project's trainer and baselines (NASRec
    # recipe: Adagrad lr 0.12, batch 512, cosine, clip 5), test log loss for training seeds 0 / 1
    # (benchmarks/sections/train.md): LR 0.4477 / 0.4479, FM 0.4279 / 0.4283, DLRM 0.4171 / 0.4173,
    # DCN-v2 0.4143 / 0.4151, Bayes 0.3405 (best baseline +22% above it). At 300k rows: LR 0.454 / 0.455,
    # FM 0.445 / 0.447, DLRM 0.442 / 0.443, DCN-v2 0.433 / 0.433, Bayes 0.339.
    first_order: float = 0.8
    dense: float = 1.0
    pairwise: float = 1.2
    pair_fraction: float = 0.3
    triple: float = 0.8
    num_triples: int = 4
    mlp: float = 1.0
    mlp_fields: int = 4
    mlp_hidden: int = 16
    gate: float = 0.8
    tail_head: int = 100  # per-category parameters shrink as (1 + rank / tail_head) ** -tail_decay:
    tail_decay: float = 1.0  # rare ids carry little signal, as in real logs, so the interactions are learnable
    dense_corr: float = 0.5  # correlation of the counts through a shared per-row activity factor
    num_gates: int = 1
    bilinear: float = 0.0
    bilinear_fraction: float = 0.5  # share of the signal field pairs with a bilinear term
    dense_cat: float = 0.0
    dense_cat_fraction: float = 1.0  # share of the signal fields crossed with the counts
    dense_product: float = 0.0
    high_order: float = 0.0
    high_order_terms: int = 8
    noise_fields: int = 0  # extra categorical fields N1.. that carry no signal
    noise_cardinality: int = 100_000
    noise_zipf: float = 1.05
    signal_fraction: float = 1.0  # share of the shape's fields that carry signal (the rest are noise)
    chunk_rows: int = 131_072
    calibration_rows: int = 65_536
    model_seed: int | None = None  # None: the data seed; set it to draw new rows from the same click model
    planted: str = ""  # "shallow" / "deep": the logit is a planted arch (`planted:SEED`), not the components
    planted_seed: int = 0  # draws the planted arch and its weights
    planted_sd: float = 3.0  # the planted logit's standard deviation (its head scaled to it)
    planted_width: int = 0  # 0: the plant's widths drawn from the space's; else every block this wide
    split: tuple[float, float, float] = (0.8, 0.1, 0.1)


def make_settings(**overrides) -> SyntheticSettings:
    """Settings with overrides, checked by name and type (a RecipeError names the bad key)."""
    fields = {f.name: f for f in dataclasses.fields(SyntheticSettings)}
    base = SyntheticSettings()
    for k, v in overrides.items():
        if k not in fields:
            raise RecipeError("synthetic", k, f"unknown setting; expected one of {sorted(fields)}")
        want = type(getattr(base, k)) if getattr(base, k) is not None else (float if k == "ctr" else int)
        ok = isinstance(v, want) or (want is float and isinstance(v, int)) or v is None or \
            (want is tuple and isinstance(v, list))
        if isinstance(v, bool) or not ok:
            raise RecipeError("synthetic", k, f"expected {want.__name__}, got {v!r}")
    s = dataclasses.replace(base, **{k: (tuple(v) if k == "split" else v) for k, v in overrides.items()})
    if len(s.split) != 3 or abs(sum(s.split) - 1) > 1e-9 or min(s.split) < 0:
        raise RecipeError("synthetic", "split", f"expected 3 non-negative fractions summing to 1, got {s.split}")
    for k, ok, want in (("noise_fields", s.noise_fields >= 0, ">= 0"), ("num_gates", s.num_gates >= 1, ">= 1"),
                        ("signal_fraction", 0 < s.signal_fraction <= 1, "in (0, 1]"),
                        ("high_order_terms", s.high_order_terms >= 1, ">= 1"),
                        ("planted", s.planted in ("", "shallow", "deep"), "'', 'shallow' or 'deep'"),
                        ("planted_sd", s.planted_sd > 0, "> 0"),
                        ("planted_width", s.planted_width >= 0, ">= 0")):
        if not ok:
            raise RecipeError("synthetic", k, f"expected {want}, got {getattr(s, k)!r}")
    return s


def with_noise_fields(profile: Profile, settings: SyntheticSettings) -> Profile:
    """The shape with `noise_fields` extra heavy-tailed categorical fields N1, N2, ... appended."""
    if settings.noise_fields <= 0:
        return profile
    extra = tuple(SparseSpec(f"N{i + 1}", settings.noise_cardinality, zipf=settings.noise_zipf)
                  for i in range(settings.noise_fields))
    return dataclasses.replace(profile, sparse=profile.sparse + extra)


class FeatureSampler:
    """Draws sparse ids (Zipf over a random id order, 0 = missing) and log1p-transformed heavy-tailed counts."""

    def __init__(self, profile: Profile, settings: SyntheticSettings, rng: np.random.Generator):
        self.profile, self.settings = profile, settings
        self.cards = [max(2, min(s.cardinality, settings.cardinality_cap)) for s in profile.sparse]
        self.cdfs, self.rank_to_id = [], []
        for spec, card in zip(profile.sparse, self.cards):
            w = np.arange(1, card, dtype=np.float64) ** -spec.zipf
            self.cdfs.append(np.cumsum(w) / w.sum())
            self.rank_to_id.append(1 + rng.permutation(card - 1))  # frequency rank must not equal id order

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        ids = np.empty((n, len(self.cards)), dtype=np.int64)
        for f, spec in enumerate(self.profile.sparse):
            rank = np.minimum(np.searchsorted(self.cdfs[f], rng.random(n), side="right"), self.cards[f] - 2)
            ids[:, f] = np.where(rng.random(n) < spec.missing, 0, self.rank_to_id[f][rank])
        specs = self.profile.dense
        mu = np.array([d.log_median for d in specs])
        sigma = np.array([d.sigma for d in specs])
        rho = self.settings.dense_corr
        z = rho * rng.standard_normal((n, 1)) + math.sqrt(1 - rho**2) * rng.standard_normal((n, len(specs)))
        raw = np.clip(np.floor(np.exp(mu + sigma * z)), [d.lo for d in specs], [d.hi for d in specs])
        missing = rng.random((n, len(specs))) < np.array([d.missing for d in specs])
        dense = np.where(missing, 0.0, np.log1p(raw)).astype(np.float32)  # missing -> 0, as in prepare
        return ids, dense


class Click(Protocol):
    """What the generator needs of a click model: logit = bias + the sum of `components`, each named in `names`;
    `record` is its part of meta.json (`field_names`: the sparse fields' names)."""

    names: tuple[str, ...]
    bias: float

    def components(self, ids: np.ndarray, dense: np.ndarray) -> dict[str, np.ndarray]: ...

    def record(self, field_names: list[str], variance: dict[str, float], total: float) -> dict: ...


# A planted click model from (features, settings, calibration ids, calibration counts): `ctrnas.supernet.planted`
PlantedFactory = Callable[["FeatureSampler", "SyntheticSettings", np.ndarray, np.ndarray], Click]


class ClickModel:
    """The hidden logit (module docstring); parameters drawn from `rng`, scales fitted on a calibration sample."""

    names = COMPONENTS

    def __init__(self, features: FeatureSampler, settings: SyntheticSettings, rng: np.random.Generator,
                 calib_ids: np.ndarray, calib_dense: np.ndarray, rng2: np.random.Generator | None = None):
        s, cards = settings, features.cards
        F, D, r = len(cards), calib_dense.shape[1], settings.rank
        # the later components and the field layout draw from their own stream: the default stays as it was
        rng2 = rng if rng2 is None else rng2
        n_shape = F - max(settings.noise_fields, 0)
        signal = np.arange(n_shape)
        if settings.signal_fraction < 1:
            k_sig = max(2, min(n_shape, round(settings.signal_fraction * n_shape)))
            signal = np.sort(rng2.choice(n_shape, k_sig, replace=False))
        self.signal = signal
        self.t_mean = calib_dense.mean(0).astype(np.float64)
        std = calib_dense.std(0).astype(np.float64)
        self.t_std = np.where(std > 0, std, 1.0)  # a constant (pseudo) dense feature carries no signal
        shrink, carries = [], set(signal.tolist())
        for f, c in enumerate(cards):
            sh = np.ones(c)  # the missing id 0 is frequent: full scale
            sh[features.rank_to_id[f]] = (1 + np.arange(c - 1) / s.tail_head) ** -s.tail_decay
            shrink.append(sh if f in carries else np.zeros(c))  # noise fields: no effect
        self.w = [rng.standard_normal(c) * shrink[f] for f, c in enumerate(cards)]
        self.ridge_a = rng.standard_normal((D, 3))
        self.ridge_s = rng.uniform(1, 3, (D, 3)) * rng.choice([-1, 1], (D, 3))  # slopes in std units of t
        self.ridge_c = rng.normal(0, 0.8, (D, 3))
        self.v = [rng.standard_normal((c, r)) * shrink[f][:, None] for f, c in enumerate(cards)]
        all_pairs = [(int(f), int(g)) for i, f in enumerate(signal) for g in signal[i + 1:]]
        k = max(1, round(s.pair_fraction * len(all_pairs)))
        self.pairs = [all_pairs[i] for i in sorted(rng.choice(len(all_pairs), k, replace=False))]
        self.vt = [rng.standard_normal((c, r)) * shrink[f][:, None] for f, c in enumerate(cards)]
        S = len(signal)
        self.triples = [tuple(sorted(signal[rng.choice(S, 3, replace=False)])) for _ in range(s.num_triples)]
        self.mlp_fields = sorted(signal[rng.choice(S, min(s.mlp_fields, S), replace=False)])
        self.u = {f: rng.standard_normal((cards[f], r)) * shrink[f][:, None] for f in self.mlp_fields}
        n_in = r * len(self.mlp_fields) + D
        self.w1 = rng.normal(0, 1.5 / math.sqrt(n_in), (n_in, s.mlp_hidden))  # gain > 1: tanh is saturating
        self.b1, self.w2 = rng.normal(0, 0.5, s.mlp_hidden), rng.standard_normal(s.mlp_hidden)
        self.gate_field, self.gated_field = (int(x) for x in signal[rng.choice(S, 2, replace=False)])
        self.gate_dense = int(rng.integers(D))
        self.q = rng.standard_normal(cards[self.gate_field]) * shrink[self.gate_field]
        self.e = rng.standard_normal(cards[self.gated_field]) * shrink[self.gated_field]
        self.gates = [(self.gate_field, self.gated_field, self.gate_dense, self.q, self.e)]
        for _ in range(s.num_gates - 1):
            g, h = (int(x) for x in signal[rng2.choice(S, 2, replace=False)])
            self.gates.append((g, h, int(rng2.integers(D)), rng2.standard_normal(cards[g]) * shrink[g],
                               rng2.standard_normal(cards[h]) * shrink[h]))
        self._draw_structure(s, rng2, cards, shrink, signal, D, r, all_pairs)
        raw = self._raw(calib_ids, calib_dense)
        self.center = {c: raw[c].mean() for c in COMPONENTS}
        sd = {c: raw[c].std() for c in COMPONENTS}
        self.scale = {c: (getattr(s, c) / sd[c] if sd[c] > 1e-12 else 0.0) for c in COMPONENTS}
        self.settings = s
        calib_logit = sum(self._scaled(raw).values())
        ctr = s.ctr if s.ctr is not None else features.profile.ctr
        self.bias = brentq(lambda b: expit(calib_logit + b).mean() - ctr, -30.0, 30.0, xtol=1e-12)

    def _draw_structure(self, s, rng, cards, shrink, signal, D, r, all_pairs) -> None:
        """Parameters of the structure components (none drawn when their scale is 0)."""
        S = len(signal)
        self.bpairs, self.b, self.m = [], {}, {}
        if s.bilinear > 0:
            k = max(1, round(s.bilinear_fraction * len(all_pairs)))
            self.bpairs = [all_pairs[i] for i in sorted(rng.choice(len(all_pairs), k, replace=False))]
            for f in sorted({f for p in self.bpairs for f in p}):
                self.b[f] = rng.standard_normal((cards[f], r)) * shrink[f][:, None]
            self.m = {p: rng.standard_normal((r, r)) / math.sqrt(r) for p in self.bpairs}
        self.cat_fields, self.d = [], {}
        if s.dense_cat > 0:
            k = max(1, round(s.dense_cat_fraction * S))
            self.cat_fields = sorted(int(f) for f in signal[rng.choice(S, k, replace=False)])
            self.d = {f: rng.standard_normal((cards[f], r)) * shrink[f][:, None] for f in self.cat_fields}
            self.cat_a = rng.normal(0, 1.5 / math.sqrt(D), (D, r))
            self.cat_c = rng.normal(0, 0.5, r)
        self.dpairs = []
        if s.dense_product > 0 and D > 1:
            all_dp = [(i, j) for i in range(D) for j in range(i + 1, D)]
            self.dpairs = [all_dp[i] for i in sorted(rng.choice(len(all_dp), min(D, len(all_dp)), replace=False))]
        self.hterms, self.sc = [], {}
        if s.high_order > 0:
            for _ in range(s.high_order_terms):
                fields = tuple(sorted(int(f) for f in signal[rng.choice(S, min(3, S), replace=False)]))
                self.hterms.append((fields, int(rng.integers(D))))
            for f in sorted({f for fs, _ in self.hterms for f in fs}):
                self.sc[f] = rng.standard_normal(cards[f]) * shrink[f]

    def fields_of(self) -> dict[str, list[int]]:
        """Which fields each component reads (the first order reads every signal field)."""
        s = self.settings
        use = {"first_order": self.signal.tolist(), "pairwise": sorted({f for p in self.pairs for f in p}),
               "triple": sorted({int(f) for t in self.triples for f in t}), "mlp": [int(f) for f in self.mlp_fields],
               "gate": sorted({f for g in self.gates for f in g[:2]}),
               "bilinear": sorted({f for p in self.bpairs for f in p}), "dense_cat": list(self.cat_fields),
               "high_order": sorted({f for fs, _ in self.hterms for f in fs})}
        return {c: v for c, v in use.items() if getattr(s, c) > 0 and self.scale.get(c, 0) > 0}

    def record(self, field_names: list[str], variance: dict[str, float], total: float) -> dict:
        """meta.json's `click_model` (`variance`: each component's over the rows, `total`: the logit's)."""
        uses = self.fields_of()
        carrying = sorted({f for fs in uses.values() for f in fs})
        return {
            "bias": float(self.bias),
            "logit_variance": total,
            "component_variance": variance,
            # shares need not sum to 1: components are not exactly uncorrelated
            "variance_share": {k: (v / total if total > 0 else 0.0) for k, v in variance.items()},
            "pairs": [list(map(int, p)) for p in self.pairs],
            "triples": [list(map(int, t)) for t in self.triples],
            "mlp_fields": [int(f) for f in self.mlp_fields],
            "gate": {"gate_field": self.gate_field, "gated_field": self.gated_field, "gate_dense": self.gate_dense},
            # the sparse fields the label depends on (by name), and which components read each
            "signal_fields": [field_names[f] for f in carrying],
            "noise_fields": [n for f, n in enumerate(field_names) if f not in set(carrying)],
            "component_fields": {c: [field_names[f] for f in fs] for c, fs in uses.items()},
        }

    def _raw(self, ids: np.ndarray, dense: np.ndarray) -> dict[str, np.ndarray]:
        t = (dense.astype(np.float64) - self.t_mean) / self.t_std
        out = {"first_order": sum(w[ids[:, f]] for f, w in enumerate(self.w))}
        ridges = np.tanh(self.ridge_s[None] * (t[:, :, None] - self.ridge_c[None]))
        out["dense"] = (self.ridge_a[None] * ridges).sum((1, 2))
        v = [vf[ids[:, f]] for f, vf in enumerate(self.v)]
        out["pairwise"] = sum(np.einsum("nk,nk->n", v[f], v[g]) for f, g in self.pairs)
        out["triple"] = sum(np.einsum("nk,nk,nk->n", self.vt[f][ids[:, f]], self.vt[g][ids[:, g]],
                                      self.vt[h][ids[:, h]]) for f, g, h in self.triples)
        z = np.concatenate([self.u[f][ids[:, f]] for f in self.mlp_fields] + [t], axis=1)
        out["mlp"] = np.tanh(z @ self.w1 + self.b1) @ self.w2
        gate = expit(3.0 * (self.q[ids[:, self.gate_field]] + t[:, self.gate_dense]))
        out["gate"] = gate * self.e[ids[:, self.gated_field]]
        for g, h, j, q, e in self.gates[1:]:
            out["gate"] = out["gate"] + expit(3.0 * (q[ids[:, g]] + t[:, j])) * e[ids[:, h]]
        zero = np.zeros(len(ids))
        bl = {f: b[ids[:, f]] for f, b in self.b.items()}
        out["bilinear"] = sum((np.einsum("nk,kl,nl->n", bl[f], self.m[(f, g)], bl[g]) for f, g in self.bpairs), zero)
        if self.cat_fields:
            phi = np.tanh(t @ self.cat_a + self.cat_c)
            out["dense_cat"] = sum(np.einsum("nk,nk->n", phi, self.d[f][ids[:, f]]) for f in self.cat_fields)
        else:
            out["dense_cat"] = zero
        out["dense_product"] = sum((t[:, i] * t[:, j] for i, j in self.dpairs), zero)
        out["high_order"] = sum((self.sc[f][ids[:, f]] * self.sc[g][ids[:, g]] * self.sc[h][ids[:, h]] * t[:, j]
                                 for (f, g, h), j in self.hterms), zero)
        return out

    def _scaled(self, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {c: (raw[c] - self.center[c]) * self.scale[c] for c in COMPONENTS}

    def components(self, ids: np.ndarray, dense: np.ndarray) -> dict[str, np.ndarray]:
        """The centred, scaled logit components of each row (float64)."""
        return self._scaled(self._raw(ids, dense))


def binary_entropy_from_logit(z: np.ndarray) -> np.ndarray:
    """H(p) = p*softplus(-z) + (1-p)*softplus(z) for p = sigmoid(z): exact where p rounds to 0 or 1."""
    p = expit(z)
    return p * np.logaddexp(0.0, -z) + (1 - p) * np.logaddexp(0.0, z)


class _Moments:
    """Streaming mean and variance of several series (Chan et al. pairwise merge)."""

    def __init__(self, names):
        self.names, self.n = list(names), 0
        self.mean, self.m2 = np.zeros(len(self.names)), np.zeros(len(self.names))

    def add(self, cols: list[np.ndarray]) -> None:
        x = np.stack(cols)
        nb, mb = x.shape[1], x.mean(1)
        m2b = ((x - mb[:, None]) ** 2).sum(1)
        n = self.n + nb
        delta = mb - self.mean
        self.m2 += m2b + delta**2 * self.n * nb / n
        self.mean += delta * nb / n
        self.n = n

    def variance(self) -> dict[str, float]:
        return {k: float(v / max(self.n, 1)) for k, v in zip(self.names, self.m2)}


def structure_overrides(structure: str) -> dict:
    """The SyntheticSettings overrides of a named structure (a one-line error lists the names)."""
    found = get_structure(structure)
    if found is None:
        raise CtrnasError(f"unknown synthetic structure {structure!r}; expected one of: {structure_names()}")
    return dict(found.settings)


def build(profile: str, seed: int, settings: SyntheticSettings,
          planted: PlantedFactory | None = None) -> tuple[FeatureSampler, Click]:
    """The feature sampler and click model of a profile: a function of (model seed, settings) only. A planted
    structure (`settings.planted`) needs `planted`, the factory of its click model (`ctrnas.supernet.planted`)."""
    if profile not in PROFILES:
        raise CtrnasError(f"unknown synthetic profile {profile!r}; expected one of {sorted(PROFILES)}")
    mseed = seed if settings.model_seed is None else settings.model_seed
    rng = np.random.default_rng(np.random.SeedSequence(mseed, spawn_key=(0,)))
    features = FeatureSampler(with_noise_fields(PROFILES[profile], settings), settings, rng)
    calib = np.random.default_rng(np.random.SeedSequence(mseed, spawn_key=(2,)))
    ids, dense = features.sample(calib, settings.calibration_rows)
    if settings.planted:
        if planted is None:
            raise CtrnasError("a planted structure's click model is a network: generate it through `ctrnas prepare "
                              "synthetic`, a recipe or `ctrnas.api.generate_synthetic` (they build it)")
        return features, planted(features, settings, ids, dense)
    rng2 = np.random.default_rng(np.random.SeedSequence(mseed, spawn_key=(3,)))
    return features, ClickModel(features, settings, rng, ids, dense, rng2)


def _settings_record(settings: SyntheticSettings) -> dict:
    """meta.json's settings; the planted ones only for a planted structure, so other folders' records (which
    the suite's caches key on) read as before those settings existed."""
    out = {**dataclasses.asdict(settings), "split": list(settings.split)}
    if not settings.planted:
        for k in ("planted", "planted_seed", "planted_sd", "planted_width"):
            out.pop(k)
    return out


def _arrow_schema(profile: Profile) -> pa.Schema:
    return pa.schema([("label", pa.float32())] + [(d.name, pa.float32()) for d in profile.dense]
                     + [(s.name, pa.int64()) for s in profile.sparse] + [("p_true", pa.float64())])


def generate(profile: str, rows: int, seed: int, out: str | Path, rows_per_shard: int = 1_000_000,
             overwrite: bool = False, source: dict | None = None, structure: str = "default",
             planted: PlantedFactory | None = None, **overrides) -> dict:
    """Write a synthetic dataset folder (labels, features, p_true) and return its meta.json.

    `structure` names the click model's mix (`synthetic_profiles.get_structure`); `overrides` go over it;
    `planted`: the factory of a planted structure's click model (`ctrnas.supernet.planted.PlantedClick`).

    Rows come in chunks of `chunk_rows`, chunk c drawn from SeedSequence(seed, spawn_key=(1, c)); a chunk is
    always drawn whole, so a dataset of N rows is the first N rows of any larger one with the same seed, and
    `rows_per_shard` changes only how rows are cut into files. `overwrite`: see ownership.py. `source`: the
    folder's source record (`dataset.synthetic_source`), written last while the folder is still locked, as
    `ctrnas.data.prepare` writes its own, so no other writer can come between the data and its record.
    """
    if rows < 0 or seed < 0:
        raise CtrnasError(f"synthetic: rows and seed must be >= 0, got rows={rows}, seed={seed}")
    overrides = {**structure_overrides(structure), **overrides}
    with folder_lock(out, "prepare synthetic"):
        try:
            meta = _generate(profile, rows, seed, Path(out), rows_per_shard, overwrite, overrides, structure, planted)
            if source is not None:
                write_source(out, source)
        except (OSError, RuntimeError) as e:
            if not disk_full(e):
                raise
            remove_transient(Path(out))  # the temp files of the write that failed (names only ctrnas makes)
            raise PathError(getattr(e, "filename", None) or out, f"cannot write the dataset: {FULL}") from None
        return meta


def _generate(profile: str, rows: int, seed: int, out: Path, rows_per_shard: int, overwrite: bool,
              overrides: dict, structure: str = "default", planted: PlantedFactory | None = None) -> dict:
    settings = make_settings(**overrides)
    features, model = build(profile, seed, settings, planted)
    prof = features.profile
    schema = DatasetSchema("label", tuple(d.name for d in prof.dense),
                           tuple(SparseFeature(s.name, c) for s, c in zip(prof.sparse, features.cards)))
    arrow = _arrow_schema(prof)
    writer = DatasetWriter(out, arrow, rows_per_shard, overwrite)
    moments = _Moments(model.names + ("logit",))
    acc = {s: np.zeros(4) for s in SPLITS}  # rows, clicks, sum p_true, sum entropy
    bounds = np.cumsum(settings.split)[:-1]
    for c in range(math.ceil(rows / settings.chunk_rows)):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1, c)))
        m = settings.chunk_rows
        ids, dense = features.sample(rng, m)
        comps = model.components(ids, dense)
        logit = model.bias + sum(comps.values())
        label = (rng.random(m) < expit(logit)).astype(np.float32)
        split = np.searchsorted(bounds, rng.random(m), side="right")
        n = min(m, rows - c * m)
        ids, dense, label, split, logit = ids[:n], dense[:n], label[:n], split[:n], logit[:n]
        moments.add([comps[k][:n] for k in model.names] + [logit])
        p, ent = expit(logit), binary_entropy_from_logit(logit)
        for si, s in enumerate(SPLITS):
            sel = np.flatnonzero(split == si)
            acc[s] += (len(sel), label[sel].sum(), p[sel].sum(), ent[sel].sum())
            cols = [label[sel]] + [dense[sel, j] for j in range(dense.shape[1])] + \
                   [ids[sel, f] for f in range(ids.shape[1])] + [p[sel]]
            table = pa.Table.from_arrays([pa.array(x) for x in cols], schema=arrow)
            for start in range(0, table.num_rows, _WRITE_ROWS):
                writer.write(s, table.slice(start, _WRITE_ROWS))
    var = moments.variance()
    total = var.pop("logit")
    names = [f.name for f in schema.sparse]
    meta = {
        "schema": schema.to_json(),
        "source": {"kind": "synthetic", "profile": profile, "rows": rows, "seed": seed,
                   **({"structure": structure} if structure != "default" else {})},
        "transforms": {"dense": "log1p", "missing_dense": 0.0, "missing_sparse_id": 0},
        "settings": _settings_record(settings),
        "splits": {s: {"ctr": float(a[1] / a[0]) if a[0] else None,
                       "mean_p_true": float(a[2] / a[0]) if a[0] else None} for s, a in acc.items()},
        "bayes_logloss": {s: (float(a[3] / a[0]) if a[0] else None) for s, a in acc.items()},
        "click_model": {**model.record(names, var, total), "structure": structure},
    }
    return writer.finish(meta)
