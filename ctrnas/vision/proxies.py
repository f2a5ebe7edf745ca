"""The proxies of the NB201 correlation harness: CLI names over the library's registry, SiGeo's App. E
presets per warm-up level, and the harness-only per-sample FR diagnostic."""

from __future__ import annotations

import time

# CLI name -> (library proxy, options). CV parity (docs/proxies.md): SiGeo's term 1 on Conv/Linear weights as
# ZiCo's code; ZiCo itself with the official gradient accumulation that produced its NB201 numbers.
VISION_PROXIES: dict[str, tuple[str, dict]] = {
    "sigeo": ("sigeo", {"modules": "zico"}),
    "zico": ("zico", {"official_accumulate": True}),
    "zico_batch": ("zico", {}),
    "synflow": ("synflow", {}),
    "nwot": ("naswot", {}),
    "naswot": ("naswot", {}),
    "params": ("params", {}),
}
# SynFlow's input is all ones, so every row of a batch is the same sample: one row gives the same
# per-sample score at 1/64 of the cost.
ONE_ROW = {"synflow"}


class FRNorms:
    """Harness-only diagnostic `frnorm`: SiGeo's FR term with the per-sample empirical Fisher (§3.3) next to
    the batch-mean one of App. E (ctrnas.vision.fisher); value = log mean_n (θᵀ∇ℓ_n)², in train mode."""

    name = "frnorm"

    def score(self, model, batches, loss_fn):
        from ctrnas.proxies.base import ProxyResult
        from ctrnas.vision.fisher import fr_norms

        was_training = model.training
        model.train()
        t0 = time.perf_counter()
        try:
            terms = fr_norms(model, batches)
        finally:
            model.train(was_training)
        return ProxyResult(terms["fr_sample"], terms, {"time_s": time.perf_counter() - t0})


def proxy_for(name: str, warmup: float):
    """The library proxy behind a harness name; SiGeo takes App. E's λ preset for the warm-up level."""
    from ctrnas.proxies import get_proxy

    if name == "frnorm":
        return FRNorms()
    lib, options = VISION_PROXIES.get(name, (name, {}))
    cls = type(get_proxy(lib))  # an unknown name fails here, naming the known ones
    return get_proxy(lib, **cls.warmup_options(dict(options), warmed_up=warmup != 0, domain="cv"))
