"""Candidates that are a baseline of the stage: trained once, as the baseline.

The seeded `dlrm-like` and `dcnv2-like` are DLRM and DCN-v2 layer by layer (`ctrnas.space.baselines`). When one of
them is among the top-k and its baseline among `final.baselines`, and the stage would build it as that baseline
(no LayerNorm, the baselines' initialisation, the run's width), training both would train one model twice at
one seed: the stage trains the baseline only and names the candidate it stands for.
"""

from __future__ import annotations

import dataclasses

from ctrnas.recipe import Recipe

# shipped arch -> the baseline module it equals
TWIN_OF = {"dlrm-like": "dlrm", "dcnv2-like": "dcnv2"}


def twin_baselines(recipe: Recipe) -> dict[str, tuple[str, str]]:
    """{arch key: (shipped name, baseline name)} of the shipped archs that this recipe's final stage would
    train exactly as one of its baselines."""
    from ctrnas.space.baselines import baseline_arch
    from ctrnas.train.normalise import use_layernorm

    final = recipe.final
    if final.embedding_init != "torchrec" or final.dense_init != "torchrec":
        return {}
    out = {}
    for name, base in TWIN_OF.items():
        arch = baseline_arch(name)
        if base in final.baselines and not use_layernorm(final.layernorm, arch, recipe.space.layernorm):
            out[arch.key()] = (name, base)
    return out


def split_twins(recipe: Recipe, top: list) -> tuple[list, dict[str, str]]:
    """`top` (history records, best first) without its twins of a baseline, each kept record carrying its
    search rank in `meta["rank"]` (its label stays "rank N"), and {"rank N (shipped name)": baseline} of those
    left out. When every one is a twin the best-ranked stays: the stage retrains at least one searched arch."""
    twins = twin_baselines(recipe)
    ranked = [dataclasses.replace(rec, meta={**rec.meta, "rank": r}) for r, rec in enumerate(top)]
    keep = [rec for rec in ranked if rec.key not in twins or "width_of" in rec.meta] or ranked[:1]
    kept = {id(rec) for rec in keep}
    left = {f"rank {rec.meta['rank']} ({twins[rec.key][0]})": twins[rec.key][1]
            for rec in ranked if id(rec) not in kept}
    return keep, left
