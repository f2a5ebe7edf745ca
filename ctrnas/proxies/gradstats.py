"""Per-batch gradient statistics shared by ZiCo and SiGeo (docs/proxies.md).

k batches, the gradient of each batch-mean loss at the *same* weights (no optimizer step between
batches, A3), float64 statistics, the ZiCo `σ > 0` mask (A4), population std (ddof=0, A2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from ctrnas.proxies.base import batch_loss, grad_or_zero


@dataclass
class GradStats:
    """The k batch gradients of each parameter group, plus FR dot products and losses."""

    grads: dict[str, torch.Tensor]          # group -> [k, n'] float64, row i = gradient on batch i, only the
    #                                         n' elements with a non-zero gradient in some batch (see collect)
    group_params: dict[str, list[str]]
    fr_dots: list[float] = field(default_factory=list)   # θᵀ g_i per batch (float64)
    losses: list[float] = field(default_factory=list)
    used_params: list[str] = field(default_factory=list)  # parameters that received a gradient


def collect(model: nn.Module, batches, loss_fn, groups: dict[str, list[tuple[str, nn.Parameter]]],
            fr_params: list[tuple[str, nn.Parameter]] | None = None, accumulate: bool = False,
            update_lr: float | None = None) -> GradStats:
    """Backward each batch at fixed weights and record the selected gradients.

    `accumulate=True` reproduces the official ZiCo code (docs/proxies.md, A11): `.grad` is never zeroed, so row i
    holds the *sum* of the gradients of batches 0..i. `update_lr` (off by default, docs/proxies.md, A3) takes a plain
    SGD step on every trainable parameter after each batch, so g_i is taken at the SGD iterate θ_i and
    the FR term uses the final θ_k (SiGeo App. E); the weights are restored before returning.
    """
    group_ps = {id(p) for ps in groups.values() for _, p in ps}
    fr_ps = {id(p) for _, p in (fr_params or [])}
    # Gradients of parameters neither term reads are wasted work (embedding tables above all): freeze
    # them for the duration; preserved_state() in Proxy.score restores requires_grad afterwards.
    needed = group_ps | fr_ps
    if update_lr is not None:
        needed |= {id(p) for p in model.parameters() if p.requires_grad}
    for p in model.parameters():
        if id(p) not in needed:
            p.requires_grad_(False)
    all_params = [p for p in model.parameters() if p.requires_grad]
    theta = [(n, p, p.detach().double().flatten()) for n, p in (fr_params or [])]
    rows: dict[str, list[torch.Tensor]] = {g: [] for g in groups}
    used: dict[str, None] = {}
    stats = GradStats({}, {g: [n for n, _ in ps] for g, ps in groups.items()})
    originals = [(p, p.detach().clone()) for p in all_params] if update_lr is not None else []
    fr_grads: list[list[torch.Tensor]] = []
    for p in all_params:
        p.grad = None
    try:
        for i, batch in enumerate(batches):
            if not accumulate:
                for p in all_params:
                    p.grad = None
            loss = batch_loss(model, batch, loss_fn)
            loss.backward()
            stats.losses.append(float(loss.detach()))
            for g, ps in groups.items():
                rows[g].append(torch.cat([grad_or_zero(p).detach().flatten() for _, p in ps]))
            for n, p in list(_named(groups)) + [(n, p) for n, p, _ in theta]:
                if p.grad is not None:
                    used[n] = None
            if theta and update_lr is None:
                # One device-to-host read per batch, not one per parameter (each read waits for a GPU);
                # summed in Python in the same order as before.
                dots = [t @ grad_or_zero(p).detach().double().flatten() for _, p, t in theta if p.grad is not None]
                stats.fr_dots.append(sum(torch.stack(dots).tolist()) if dots else 0)
            elif theta:
                fr_grads.append([grad_or_zero(p).detach().double().flatten() for _, p, _ in theta])
            if update_lr is not None:
                with torch.no_grad():
                    for p in all_params:
                        if p.grad is not None:
                            p.sub_(update_lr * p.grad)
        if originals:
            theta_k = [p.detach().double().flatten() for _, p, _ in theta]
            stats.fr_dots = [sum(torch.stack([t @ g for t, g in zip(theta_k, gs)]).tolist()) for gs in fr_grads]
    finally:  # the SGD steps are undone even when a batch fails
        with torch.no_grad():
            for p, orig in originals:
                p.copy_(orig)
    for p in all_params:
        p.grad = None
    # Elements whose gradient is 0 in every batch have σ = 0 and are masked out of term 1 anyway; a
    # supernet path owns full-size shared tensors of which it touches a slice, so dropping them before
    # the float64 statistics saves most of their cost.
    for g, r in rows.items():
        G = torch.stack(r)
        stats.grads[g] = G[:, G.ne(0).any(dim=0)].double()
    stats.used_params = list(used)
    return stats


def _named(groups):
    for ps in groups.values():
        yield from ps


def zico_ratio_sum(G: torch.Tensor, sigma_rel_eps: float | None = None,
                   per_element: bool = False) -> float:
    """Σ_j mean_i|G_ij| / std_i(G_ij) over elements with std > 0 (ZiCo, SiGeo Eq. 7 term 1 inside the log);
    with `per_element`, divided by the number of those elements (the size-normalised reading).

    `sigma_rel_eps` replaces the exact `σ > 0` test by `σ > eps · max|G|` (A4 option against round-off).
    """
    k = G.shape[0]
    # Two passes over k rows, written out: numpy's np.std order of operations, and much faster than
    # Tensor.std(dim=0) on a [k, n] tensor with tiny k.
    mean = G[0].clone()
    mu = G[0].abs()
    for i in range(1, k):
        mean += G[i]
        mu += G[i].abs()
    mean /= k
    mu /= k
    var = (G[0] - mean).square_()
    for i in range(1, k):
        var += (G[i] - mean).square_()
    sigma = (var / k).sqrt_()
    if sigma_rel_eps is None:
        mask = sigma > 0
    else:
        mask = sigma > sigma_rel_eps * float(G.abs().max()) if G.numel() else sigma > 0
    ratio = mu[mask] / sigma[mask]
    if per_element:
        return float(ratio.mean()) if ratio.numel() else 0.0
    return float(ratio.sum())


NORMALISE = ("none", "modules", "elements", "both")


def zico_term(stats: GradStats, neuron_wise: bool = False, sigma_rel_eps: float | None = None,
              normalise: str = "none"):
    """Σ_m log Σ(μ_m/σ_m) over groups with a positive ratio sum (modules summing to 0 are skipped, as in
    ZiCo's code). Neuron-wise (SiGeo §3.5): one log over all selected parameters at once.

    `normalise` (not in the papers; tried because the sums reward subnets with more and larger modules):
    "modules" averages the per-module logs instead of summing them, "elements" takes the log of each
    module's mean ratio instead of its sum, "both" does both.

    Returns (term, names of the groups that contributed).
    """
    per_element = normalise in ("elements", "both")
    if neuron_wise:
        if not stats.grads:
            return 0.0, []
        r = zico_ratio_sum(torch.cat(list(stats.grads.values()), dim=1), sigma_rel_eps, per_element)
        return (math.log(r), ["<all>"]) if r > 0 else (0.0, [])
    total, used = 0.0, []
    for g, G in stats.grads.items():
        r = zico_ratio_sum(G, sigma_rel_eps, per_element)
        if r > 0:
            total += math.log(r)
            used.append(g)
    if normalise in ("modules", "both") and used:
        total /= len(used)
    return total, used
