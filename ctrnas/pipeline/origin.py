"""Where the final stage's winner came from and by how much it won: the first line of the console result,
of summary.md and of the model card, and the `origin` keys of metrics.json.

A winner is one of: a baseline (the final stage trains them beside the top-k and exports one when it is
best on validation); a shipped arch (`dlrm-like`, `dcnv2-like`: hand-designed models the search was
seeded with, so no search find; also a seed's copy at other table widths, which an embedding search starts
from); a child of evolution (its parent, generation and the seed or random draw
its line descends from); a random draw (the initial population, or random search). The margins are
against the best baseline and the best retrained seed, on validation (what chose it) and on test.
"""

from __future__ import annotations

import dataclasses
import math
import statistics

from ctrnas.errors import CtrnasError
from ctrnas.pipeline.results import FinalResult, TrainedModel

# a shipped arch is the same model as a baseline module (ctrnas.space.baselines): naming it keeps a copy from
# being read as a find (deepfm-terms-like computes DeepFM's logits on DeepFM's weights: tests/space/test_baselines.py)
COPIES = {"dlrm-like": "dlrm", "dcnv2-like": "dcnv2", "deepfm-terms-like": "deepfm"}


def shipped_names(given: tuple[str, ...] = ()) -> dict[str, str]:
    """{arch key at the run's own width: name} of the shipped archs, and of the arch files among `given` (a
    recipe's `search.seeds`) by their path as the recipe wrote it."""
    from ctrnas.space.baselines import SHIPPED_ARCHS, baseline_arch, load_arch

    names = {baseline_arch(n).key(): n for n in SHIPPED_ARCHS}
    for spec in given:
        if spec not in SHIPPED_ARCHS:
            names.setdefault(_run_width_key(load_arch(spec)), spec)
    return names


def _given(name: str, given: tuple[str, ...]) -> bool:
    """Whether seed `name` ("runs/a/best_arch.json", or its copy "runs/a/best_arch.json (10 at 4)") is an
    arch file the recipe named, not a shipped arch."""
    from ctrnas.space.baselines import SHIPPED_ARCHS

    return any(name == g or name.startswith(g + " (") for g in given if g not in SHIPPED_ARCHS)


def _run_width_key(arch) -> str:
    return dataclasses.replace(arch, emb_dim=None).key()


def _widths(arch) -> str:
    """`arch`'s own widths in a few words: its common width when it has one ("width 8") and its tables not at it
    ("10 at 4", "25 dropped, 1 at 8")."""
    counts: dict[int, int] = {}
    for _, w in arch.table_dims:
        counts[w] = counts.get(w, 0) + 1
    tables = ", ".join(f"{n} dropped" if w == 0 else f"{n} at {w}" for w, n in sorted(counts.items()))
    return "; ".join(x for x in (f"width {arch.emb_dim}" if arch.emb_dim else "", tables) if x)


def seed_names(history, given: tuple[str, ...] = ()) -> dict[str, str]:
    """`shipped_names(given)` plus the initial population's copies of a seed at other table widths (an
    embedding search seeds each seed at narrower tables and without the fields its probe finds quiet): the
    same blocks, named "dcnv2-like (10 at 4)", not a random draw."""
    from ctrnas.space import Arch
    from ctrnas.space.baselines import load_arch

    names = shipped_names(given)
    blocks = {}
    for n in names.values():
        blocks.setdefault(dataclasses.replace(load_arch(n), emb_dim=None, table_dims=()).key(), n)
    for r in history:
        if r.parent_key or not isinstance(r.arch, (dict, str)):
            continue
        try:
            arch = Arch.from_json(r.arch)
        except (CtrnasError, ValueError, KeyError, TypeError):  # not an arch record (a hand-made history)
            continue
        name = blocks.get(dataclasses.replace(arch, emb_dim=None, table_dims=()).key())
        if name is not None and (arch.table_dims or arch.emb_dim):
            # by its own key (a parent or a line's root) and, with its tables, at the run's width (a winner at
            # any common width: named by its tables alone, the origin line adds the winner's own width)
            names.setdefault(r.key, f"{name} ({_widths(arch)})")
            if arch.table_dims:
                names.setdefault(_run_width_key(arch), f"{name} ({_widths(dataclasses.replace(arch, emb_dim=None))})")
    return names


def _label(key: str, shipped: dict[str, str]) -> str:
    return shipped.get(key, f"`{key}`")


def _root(roots: dict[str, str], key: str, shipped: dict[str, str]) -> str:
    """The seed or random draw a line of children descends from (`roots`: `History.roots()`)."""
    key = roots.get(key, key)
    return shipped.get(key, f"random draw `{key}`")


def lineage(history, maximize: bool, given: tuple[str, ...] = ()) -> dict:
    """How evolution's children relate to their parents: how many descend from each seed (or from random
    draws), and how many scored better than their parent at the first rung both were scored at (the cheapest
    fidelity every candidate gets), with the median absolute change. `given`: the recipe's `search.seeds`."""
    import statistics

    shipped = seed_names(history, given)
    first: dict = {}
    for r in history:
        first.setdefault((r.key, r.rung or 0), r)
    lines = history.roots()
    roots: dict[str, int] = {}
    better = changes = 0
    deltas = []
    for r in history:
        if not r.parent_key or (r.rung or 0) != 0:
            continue
        root = _root(lines, r.parent_key, shipped)
        root = "random draws" if root.startswith("random draw") else root
        roots[root] = roots.get(root, 0) + 1
        parent = first.get((r.parent_key, 0))
        if parent is not None and math.isfinite(parent.value) and math.isfinite(r.value):
            changes += 1
            better += (r.value > parent.value) if maximize else (r.value < parent.value)
            deltas.append(abs(r.value - parent.value))
    return {"children": sum(roots.values()), "descend_from": roots, "better_than_parent": better,
            "compared": changes, "median_abs_change": statistics.median(deltas) if deltas else None}


def _margin(a: TrainedModel, b: TrainedModel | None) -> dict | None:
    if b is None:
        return None
    return {"label": b.label, "val": a.val.get("logloss", math.nan) - b.val.get("logloss", math.nan),
            "test": a.test.get("logloss", math.nan) - b.test.get("logloss", math.nan)}


def _best(models) -> TrainedModel | None:
    usable = [m for m in models if m.status == "ok" and math.isfinite(m.val.get("logloss", math.nan))]
    return min(usable, key=lambda m: m.val["logloss"]) if usable else None


def origin(final: FinalResult, history, verdict: dict | None = None, given: tuple[str, ...] = ()) -> dict:
    """The chosen model's origin and margins as data (metrics.json `origin`); `verdict`: the export against its
    rival over training seeds (`ctrnas.pipeline.final.verdict`), when the run measured it; `given`: the
    recipe's `search.seeds`, whose arch files are named by their path."""
    shipped = seed_names(history, given)
    win = final.best
    out: dict = {"label": win.label}
    if win.arch is None:
        out.update(kind="baseline", name=win.label, fallback=final.fallback)
    else:
        key = _run_width_key(win.arch)
        rec = history[win.history_index] if win.history_index is not None else None
        out["arch_key"], out["width"] = win.arch.key(), win.arch.emb_dim
        if key in shipped and _given(shipped[key], given):
            out.update(kind="given", name=shipped[key])
        elif key in shipped:
            out.update(kind="shipped", name=shipped[key], copy_of=COPIES.get(shipped[key]))
        elif rec is not None and rec.parent_key:
            out.update(kind="child", parent=_label(rec.parent_key, shipped), generation=rec.generation,
                       descends_from=_root(history.roots(), rec.parent_key, shipped))
        else:
            out.update(kind="random", generation=rec.generation if rec is not None else None)
    others = [b for b in final.baselines if b is not win]
    seeds = [c for c in final.candidates if c is not win and c.arch is not None
             and _run_width_key(c.arch) in shipped]
    out["vs_best_baseline"] = _margin(win, _best(others))
    out["vs_best_seed"] = _margin(win, _best(seeds))
    out["verdict"] = verdict
    out["line"] = origin_line(out)
    return out


def origin_line(o: dict) -> str:
    """One line: what was chosen, where it came from, its margins (negative: lower log loss than the other)
    and the verdict. "won" only where the verdict says "better" beyond the seed noise."""
    width = f" at width {o['width']}" if o.get("width") else ""
    won = (o.get("verdict") or {}).get("words") == "better"
    chosen = "won" if won else "was chosen"
    if o["kind"] == "baseline" and o.get("fallback"):
        what = f"the {o['name']} baseline is reported: {o['fallback']}"
    elif o["kind"] == "baseline":
        what = f"the {o['name']} baseline {chosen} on validation (no searched arch beat it there)"
    elif o["kind"] == "shipped":
        copy = f", a copy of the {o['copy_of']} baseline's architecture" if o.get("copy_of") else ""
        what = f"the shipped arch {o['name']}{width} {chosen} (a seed of the search{copy}: not a search find)"
    elif o["kind"] == "given":
        what = (f"the given arch {o['name']}{width} {chosen} (a seed the recipe named in search.seeds: not a find "
                f"of this run)")
    elif o["kind"] == "child":
        what = (f"a child of evolution {chosen}{width}: generation {o['generation']}, parent {o['parent']}, "
                f"descending from {o['descends_from']}")
    else:
        what = f"a random draw {chosen}{width} (generation {o['generation']})"
    parts = [what]
    # a winning baseline (seed) is compared with the best of the *other* baselines (seeds): "next best"
    for kinds, name, m in ((("baseline",), "baseline", o["vs_best_baseline"]),
                           (("shipped", "given"), "seed", o["vs_best_seed"])):
        name = f"next best {name}" if o["kind"] in kinds else f"best {name}"
        if m is not None:
            parts.append(f"vs {name} {m['label']}: val {m['val']:+.5f}, test {m['test']:+.5f}")
    parts.append(verdict_line(o["verdict"]) if o.get("verdict") else "verdict not measured (one training seed)")
    return "; ".join(parts)


# The verdict's words (`ctrnas.pipeline.final.verdict` trains the seeds): margin = the export's mean test log
# loss - its rival's over the same training seeds, pair sd = sqrt(sd_a^2 + sd_b^2).
BEYOND = 2.0  # pair sds a margin must pass to be called a difference


def words(margin: float, pair_sd: float) -> str:
    """"better", "worse" or "level within noise" for a test log loss margin (export - rival)."""
    if not math.isfinite(margin) or not math.isfinite(pair_sd):
        return "not measured"
    if margin < -BEYOND * pair_sd:
        return "better"
    if margin > BEYOND * pair_sd:
        return "worse"
    return "level within noise"


def judge_seeds(export: list[float], rival: list[float]) -> dict:
    """The verdict of test log losses per training seed (the same seeds for both, in order)."""
    n = min(len(export), len(rival))
    a, b = export[:n], rival[:n]
    if n < 2 or not all(math.isfinite(x) for x in a + b):
        return {"seeds": n, "margin": math.nan, "pair_sd": math.nan, "in_pair_sd": math.nan,
                "words": "not measured"}
    margin = statistics.fmean(a) - statistics.fmean(b)
    pair = math.hypot(statistics.stdev(a), statistics.stdev(b))
    return {"seeds": n, "margin": margin, "pair_sd": pair,
            "in_pair_sd": margin / pair if pair > 0 else (0.0 if margin == 0 else math.copysign(math.inf, margin)),
            "words": words(margin, pair)}


def verdict_line(v: dict) -> str:
    """The verdict as the origin line's last part."""
    if v.get("words") == "not measured" or not math.isfinite(v.get("margin", math.nan)):
        return f"verdict not measured ({v.get('why', 'one training seed')})"
    return (f"verdict over {v['seeds']} training seeds: {v['words']} than {v['rival']} (test {v['margin']:+.5f}, "
            f"{v['in_pair_sd']:+.1f} pair sd of {v['pair_sd']:.5f})").replace("level within noise than",
                                                                               "level within noise with")
