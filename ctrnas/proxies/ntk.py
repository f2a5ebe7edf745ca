"""Eigen-NAS / NTK trace (Zhu et al. 2022, §3.3; M_Trace, Eq. 7.4 of Shu Yao's PhD thesis
"Understanding and Improving Neural Architecture Search", NUS 2022): trace K = Σ_i ‖∇θ f(x_i)‖²,
label-free, with the empirical NTK's λ_min, λ_max and condition number as diagnostics, and KNAS's
M_KNAS = sqrt|mean K_ij| (thesis D.11) as a term.

K = J Jᵀ over N samples (N·C rows for C outputs: the trace of the full NTK, summed over the logits; CTR
has C = 1, the paper's single-output setting).
Per-sample gradients, eval mode (per-sample independence; BatchNorm uses running statistics):
- `method="layerwise"` (default): Linear layers by the per-sample-gradient identity (one forward, one
  backward per output coordinate, no Jacobian materialised beyond one layer), every other parameter
  (attention in-projections, norms, convolutions) by the vmap path below. Same K as "vmap", much faster
  on a supernet path, whose Linear layers are full-size shared tensors used in slices.
- `method="vmap"`: `torch.func.vmap(jacrev(functional_call))`. A KeyedJaggedTensor cannot be
  vmapped, so for CTR models the embedding outputs are precomputed and fed back per sample
  (`continuous.ContinuousInputs`); the gradients are then those of the dense-part parameters
  (everything but the embedding tables).
- `method="loop"`: one forward of the whole batch, then one backward per output coordinate; works for
  any model and any parameter set, including embedding tables (`embeddings=True`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.func import functional_call, jacrev, vmap

from torch import nn

from ctrnas.proxies.base import Proxy, check_choice, register, trainable_params
from ctrnas.proxies.continuous import ContinuousInputs


def _chunks(params, rows: int, max_mb: float):
    """Split parameters into groups whose Jacobian block (rows x elements, float32) fits in max_mb."""
    cap = max(1, int(max_mb * 2**20 / 4 / max(rows, 1)))
    group, size = [], 0
    for n, p in params:
        if group and size + p.numel() > cap:
            yield group
            group, size = [], 0
        group.append((n, p))
        size += p.numel()
    if group:
        yield group


def ntk_matrix(model, batch, num_samples: int, method: str = "layerwise", embeddings: bool = False,
               max_jacobian_mb: float = 256.0):
    """K = J Jᵀ (float64, N·C rows, sample-major) of the outputs w.r.t. the trainable parameters, and
    the parameter names.

    J is never held whole: parameters are taken in groups whose Jacobian block fits `max_jacobian_mb`,
    and K accumulates Σ_groups J_g J_gᵀ (a supernet path owns full-size shared tensors, so a whole
    64 × P Jacobian would take gigabytes).
    """
    inputs = batch[0]
    if method in ("vmap", "layerwise"):
        params = trainable_params(model, embeddings=False)
        ci = ContinuousInputs(model, inputs)
        reps = [r[:num_samples] for r in ci.capture()]
        rest, K = params, None
        if method == "layerwise":
            K, covered = _layerwise_linear_kernel(model, ci, reps)
            rest = [(n, p) for n, p in params if id(p) not in covered]
        if rest:
            Kv = _vmap_kernel(model, ci, reps, rest, max_jacobian_mb)
            K = Kv if K is None else K + Kv
        return K, [n for n, _ in params]
    params = trainable_params(model, embeddings=embeddings)
    out = model(*inputs)
    out = out[:num_samples].reshape(min(num_samples, out.shape[0]), -1).reshape(-1)
    K = None
    for group in _chunks(params, out.shape[0], max_jacobian_mb):
        ps = [p for _, p in group]
        J = torch.stack([torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for p, g in
                                    zip(ps, torch.autograd.grad(o, ps, retain_graph=True, allow_unused=True))])
                         for o in out])
        Kg = (J @ J.T).double()
        K = Kg if K is None else K + Kg
    return K, [n for n, _ in params]


def _vmap_kernel(model, ci, reps, params, max_mb):
    """Σ_groups J_g J_gᵀ with J_g from vmap(jacrev(functional_call)) over the samples."""
    rows = reps[0].shape[0] * max(1, _outputs_per_sample(ci, reps))
    K = None
    for group in _chunks(params, rows, max_mb):
        pdict = {n: p.detach() for n, p in group}

        def f(pd, *xs):
            out = ci.run([x.unsqueeze(0) for x in xs], lambda *a: functional_call(model, pd, a))
            return out.reshape(-1)

        jac = vmap(jacrev(f), in_dims=(None,) + (0,) * len(reps))(pdict, *reps)
        J = torch.cat([jac[n].reshape(jac[n].shape[0] * jac[n].shape[1], -1) for n, _ in group], dim=1)
        Kg = (J @ J.T).double()
        K = Kg if K is None else K + Kg
        del jac, J
    return K


def _linear_types() -> tuple[type, ...]:
    # Modules whose forward is exactly F.linear(input, weight[slice], bias[slice]): the input a forward
    # hook sees is the matmul's. (Subclasses with other forwards, e.g. MultiheadAttention's out_proj,
    # which is never called as a module, go to the vmap path.)
    try:
        from ctrnas.supernet.elastic import ElasticLinear
        return (nn.Linear, ElasticLinear)
    except ImportError:
        return (nn.Linear,)


def _layerwise_linear_kernel(model, ci, reps):
    """The NTK part of Linear layers from one forward and C backward passes (the per-sample-gradient
    trick of Opacus/BackPACK): a Linear's per-sample weight gradient is Σ_t g_t x_tᵀ, with x its input
    and g the gradient of the sample's output w.r.t. the layer's output, so no vmap is needed.

    Returns (K, ids of the parameters covered); layers called more than once per forward are left out
    (their slices may differ between calls).
    """
    types = _linear_types()
    calls: list = []
    counts: dict[int, int] = {}

    def hook(m, inp, out):
        counts[id(m)] = counts.get(id(m), 0) + (1 if inp and torch.is_tensor(out) else 2)  # 2: leave it out
        if inp and torch.is_tensor(out):
            calls.append((m, inp[0], out))

    mods = [m for m in model.modules() if type(m) in types and m.weight.requires_grad]
    handles = [m.register_forward_hook(hook) for m in mods]
    try:
        out = ci.run(reps)
    finally:
        for hd in handles:
            hd.remove()
    calls = [(m, x, o) for m, x, o in calls if counts[id(m)] == 1 and o.requires_grad]
    n = reps[0].shape[0]
    out = out.reshape(n, -1)
    C = out.shape[1]
    grads = [torch.autograd.grad(out[:, c].sum(), [o for _, _, o in calls], retain_graph=c < C - 1,
                                 allow_unused=True) for c in range(C)] if calls else []
    K = torch.zeros(n * C, n * C, dtype=torch.float64, device=out.device)
    covered: set[int] = set()
    for j, (m, x, _) in enumerate(calls):
        x3 = x.detach().reshape(n, -1, x.shape[-1])
        g3s = [x3.new_zeros(n, x3.shape[1], m.out_features) if grads[c][j] is None
               else grads[c][j].reshape(n, -1, grads[c][j].shape[-1]) for c in range(C)]
        G = torch.stack(g3s, 1)                      # [n, C, T, out]
        if x3.shape[1] == 1:
            # One position per sample: <g_i x_iᵀ, g_j x_jᵀ> = (g_i·g_j)(x_i·x_j); nothing materialised.
            Gm = G[:, :, 0].reshape(n * C, -1).double()
            X = x3[:, 0].double()
            K += (Gm @ Gm.T) * (X @ X.T).repeat_interleave(C, 0).repeat_interleave(C, 1)
        else:
            # rows ordered (sample, output) like the vmap Jacobian
            W = torch.einsum("ncto,nti->ncoi", G, x3).reshape(n * C, -1).double()
            K += W @ W.T
        covered.add(id(m.weight))
        if m.bias is not None and m.bias.requires_grad:
            B = G.sum(2).reshape(n * C, -1).double()
            K += B @ B.T
            covered.add(id(m.bias))
    return K, covered


def _outputs_per_sample(ci, reps) -> int:
    with torch.no_grad():
        out = ci.run([r[:1] for r in reps])
    return int(out[0].numel()) if out.ndim > 1 else 1


def ntk_spectrum(K: torch.Tensor) -> dict[str, float]:
    """trace, λ_min, λ_max and condition number of the NTK K."""
    ev = torch.linalg.eigvalsh(K)
    lmin, lmax = float(ev[0]), float(ev[-1])
    m = K.shape[0]
    # M_KNAS (thesis D.11) = sqrt|mean of the NTK entries| = ‖mean_i ∇θ f(x_i)‖, a by-product.
    return {"trace": float(torch.trace(K)), "lambda_min": lmin, "lambda_max": lmax,
            "cond": lmax / lmin if lmin > 0 else float("inf"), "knas": float(K.sum().abs().sqrt()) / m}


@register("ntk_trace")
@dataclass(frozen=True)
class NtkTrace(Proxy):
    """Eigen-NAS score: trace of the empirical NTK on the first `num_samples` rows of the first batch."""

    needs_labels = False
    default_mode = "eval"
    num_samples: int = 64
    method: str = "layerwise"
    embeddings: bool = False
    max_jacobian_mb: float = 256.0
    mode: str = "eval"

    def _kernel(self, model, batches):
        """(NTK matrix, its spectrum, names of the parameters it was taken over) on the first batch."""
        check_choice(self.name, "method", self.method, ["layerwise", "vmap", "loop"])
        self._set_mode(model)
        K, names = ntk_matrix(model, batches[0], self.num_samples, self.method, self.embeddings,
                              self.max_jacobian_mb)
        return K, ntk_spectrum(K), names

    def _compute(self, model, batches, loss_fn):
        K, spec, names = self._kernel(model, batches)
        return spec["trace"], spec, {"params": names, "rows": int(K.shape[0]), "batches": 1}
