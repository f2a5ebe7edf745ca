"""Shapes of the synthetic profiles: field names, cardinalities, Zipf skew, missing rates, dense count laws.

Numbers follow the real datasets (NASRec's split sizes and schemas): Criteo Kaggle's 13 counts + 26 categoricals with
its raw cardinalities and missing rates, Avazu's 22 categoricals + NASRec's pseudo dense feature (constant 0),
KDD Cup 2012 track 2's 3 counts + 10 categoricals (with the user-profile join). Cardinalities are the real
ones; the generator caps them (`cardinality_cap`) so CPU training stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DenseSpec:
    """A count feature: raw = floor(exp(N(log_median, sigma))) clipped to [lo, hi]; stored as log1p(raw)."""

    name: str
    log_median: float
    sigma: float
    missing: float = 0.0  # a missing count is stored as 0, like the real preprocessing
    lo: float = 0.0
    hi: float = float("inf")


@dataclass(frozen=True)
class SparseSpec:
    """A categorical field: ids 1..cardinality-1 drawn Zipf(`zipf`); id 0 means missing."""

    name: str
    cardinality: int
    zipf: float = 1.1
    missing: float = 0.0


@dataclass(frozen=True)
class Profile:
    name: str
    dense: tuple[DenseSpec, ...]
    sparse: tuple[SparseSpec, ...]
    ctr: float  # target base rate of clicks


def _ln(x: float) -> float:
    import math

    return math.log(x)


_CRITEO_CARD = (1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27, 14992,
                5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572)
_CRITEO_CMISS = {3: .034, 4: .034, 12: .034, 16: .034, 19: .44, 20: .44, 21: .034, 22: .76, 24: .034, 25: .44, 26: .44}
# (median count, sigma, missing rate) of I1..I13, read off the Kaggle train.txt summary statistics
_CRITEO_DENSE = ((1, 1.3, .45), (3, 1.6, 0.0), (7, 1.5, .21), (4, 1.0, .22), (2900, 1.6, .03), (30, 1.7, .23),
                 (3, 1.6, .04), (9, 1.0, .0005), (40, 1.4, .04), (1, 0.6, .45), (2, 1.0, .04), (1, 1.2, .76),
                 (4, 1.1, .22))

CRITEO = Profile(
    name="criteo",
    dense=tuple(DenseSpec(f"I{i + 1}", _ln(m), s, miss) for i, (m, s, miss) in enumerate(_CRITEO_DENSE)),
    sparse=tuple(SparseSpec(f"C{i + 1}", c, zipf=1.05 + 0.1 * (i % 3), missing=_CRITEO_CMISS.get(i + 1, 0.0))
                 for i, c in enumerate(_CRITEO_CARD)),
    ctr=0.256,
)

_AVAZU = (("hour", 240, 0.3), ("C1", 7, 2.5), ("banner_pos", 7, 2.5), ("site_id", 4737, 1.3),
          ("site_domain", 7745, 1.3), ("site_category", 26, 1.5), ("app_id", 8552, 1.5), ("app_domain", 559, 1.8),
          ("app_category", 36, 1.8), ("device_id", 2686408, 1.6), ("device_ip", 6729486, 1.1),
          ("device_model", 8251, 1.1), ("device_type", 5, 2.5), ("device_conn_type", 4, 2.0), ("C14", 2626, 1.1),
          ("C15", 8, 2.5), ("C16", 9, 2.5), ("C17", 435, 1.1), ("C18", 4, 1.2), ("C19", 68, 1.2), ("C20", 172, 1.3),
          ("C21", 60, 1.2))

AVAZU = Profile(
    name="avazu",
    # NASRec feeds Avazu one pseudo dense feature that is always 0 (docs/nasrec.md, Data)
    dense=(DenseSpec("dense_0", 0.0, 0.0, missing=1.0),),
    sparse=tuple(SparseSpec(n, c, zipf=z) for n, c, z in _AVAZU),
    ctr=0.17,
)

_KDD = (("DisplayURL", 26273, 1.2, 0.0), ("AdID", 641707, 1.1, 0.0), ("AdvertiserID", 14848, 1.1, 0.0),
        ("QueryID", 26243606, 1.0, 0.0), ("KeywordID", 1188089, 1.05, 0.0), ("TitleID", 4051441, 1.05, 0.0),
        ("DescriptionID", 3171830, 1.05, 0.0), ("UserID", 23907635, 0.9, 0.0), ("Gender", 4, 0.5, 0.25),
        ("Age", 8, 0.5, 0.25))

KDD2012 = Profile(
    name="kdd2012",
    dense=(DenseSpec("Impression", 0.0, 1.0, lo=1.0), DenseSpec("Depth", _ln(2), 0.4, lo=1.0, hi=3.0),
           DenseSpec("Position", _ln(1.5), 0.5, lo=1.0, hi=3.0)),
    sparse=tuple(SparseSpec(n, c, zipf=z, missing=m) for n, c, z, m in _KDD),
    ctr=0.04,
)

PROFILES: dict[str, Profile] = {p.name: p for p in (CRITEO, AVAZU, KDD2012)}


@dataclass(frozen=True)
class Structure:
    """How the click model mixes its components (`SyntheticSettings` overrides), for any shape profile.

    Each is built so a different family of hand-designed models should fit it best (`intended`); which one
    does is measured (datasets/README.md, docs/results.md)."""

    name: str
    settings: tuple[tuple[str, object], ...]  # SyntheticSettings overrides, in order
    intended: str
    about: str


def _s(base: dict | None = None, **kw) -> tuple[tuple[str, object], ...]:
    return tuple({**(base or {}), **kw}.items())


_QUIET = dict(triple=0.0, mlp=0.0, gate=0.0)  # components a structure switches off unless it names them

STRUCTURES: dict[str, Structure] = {s.name: s for s in (
    Structure("default", (), "DCN-v2",
              "every component at the demo's scales (first order, dense ridges, pairwise on 30% of the pairs, "
              "4 three-way products, a small MLP of 4 fields, one gate): the data the demo and benchmarks use"),
    Structure("pairwise", _s(_QUIET, first_order=0.6, dense=0.3, pairwise=2.0, pair_fraction=1.0, mlp=0.8),
              "DeepFM, then FM",
              "FM's own model (first order plus a rank-4 inner product on every pair of fields) and a small MLP "
              "part of 4 fields that only the models with a deep part can fit (without it FM and DeepFM tie)"),
    Structure("crosses", _s(_QUIET, first_order=0.6, dense=0.3, pairwise=0.3, bilinear=1.5, bilinear_fraction=0.5,
                            high_order=1.0, triple=0.8, num_triples=8), "DCN-v2",
              "high-order multiplicative crosses: a different bilinear map per field pair (no shared embedding "
              "fits them all, a cross layer's full matrix does), 8 three-way products and degree-4 products of "
              "three fields' codes and a count"),
    Structure("dense-gates", _s(_QUIET, first_order=0.6, dense=0.8, pairwise=0.3, dense_cat=1.5, gate=1.0,
                                num_gates=4, dense_product=0.8), "DLRM",
              "dense-by-categorical terms: the inner product of a non-linear function of the counts with each "
              "field's vector (DLRM's bottom MLP dotted with the embeddings), 4 count-driven gates, products of "
              "counts"),
    Structure("dense-by-category", _s(_QUIET, first_order=0.6, dense=0.5, pairwise=0.0, dense_cat=2.5), "DLRM",
              "mostly one part: the inner product of a non-linear function of the counts with each field's vector, "
              "which is DLRM's bottom MLP dotted with the embeddings (as `dense-gates` without its gates and "
              "products of counts)"),
    Structure("deep", _s(triple=0.0, gate=0.0, first_order=0.4, dense=0.2, pairwise=0.2, mlp=2.0, mlp_fields=3,
                         mlp_hidden=32), "an MLP (DeepFM / AutoInt+ / xDeepFM deep parts)",
              "a deep non-linear mixture of 3 fields and the counts (a saturated tanh network) over a weak "
              "first-order and pairwise part"),
    Structure("sparse-noise", _s(_QUIET, first_order=1.0, dense=0.3, pairwise=0.6, pair_fraction=0.1,
                                 noise_fields=20, signal_fraction=0.5, cardinality_cap=100_000, tail_head=300),
              "few parameters (LR / FM); a search that drops fields and narrows tables",
              "half the shape's fields carry signal (mostly first order, a few pairs); 20 extra fields of pure "
              "noise with 100k-id heavy-tailed vocabularies, and tables capped at 100k ids instead of 20k"),
)}


# `planted:SEED` / `planted-deep:SEED`: the logit is an arch of the search space with random weights, drawn
# from SEED (`ctrnas.supernet.planted`); its depth class by name. The CTR is set, whatever the shape's.
PLANTED = {"planted": "shallow", "planted-deep": "deep"}
# the CTR, whatever the shape's; the logit's sd; embedding rows shrunk as (1 + rank / 10) ** -2 by frequency rank,
# so the signal sits on ids seen often enough to learn (measured: at (1 + rank / 100) ** -1 and sd 2 the 300k-row
# kdd2012 plant left every model, the plant itself too, about 0.10 above the Bayes optimum)
PLANTED_SETTINGS = dict(ctr=0.25, planted_sd=3.0, tail_head=10, tail_decay=2.0)


def planted_kind(name: str) -> tuple[str, int] | None:
    """(depth class, seed) of a planted structure name ("planted-deep:3" -> ("deep", 3)), else None."""
    kind, sep, seed = name.partition(":")
    if sep and kind in PLANTED and seed.isdigit():
        return PLANTED[kind], int(seed)
    return None


def get_structure(name: str) -> Structure | None:
    """The structure called `name`: one of STRUCTURES or a planted one (`planted:SEED`, `planted-deep:SEED`)."""
    if name in STRUCTURES:
        return STRUCTURES[name]
    planted = planted_kind(name)
    if planted is None:
        return None
    depth, seed = planted
    return Structure(name, _s(planted=depth, planted_seed=seed, **PLANTED_SETTINGS),
                     "the planted arch itself (no hand design)",
                     f"the logit is a {depth} arch of the search space drawn from seed {seed}, with random weights "
                     "(ctrnas.supernet.planted)")


def structure_names() -> str:
    """The structure names for messages and help: the fixed ones and the planted forms."""
    return ", ".join(STRUCTURES) + ", " + ", ".join(f"{k}:SEED" for k in PLANTED)
