"""Dextr (Asthana et al., TMLR; Eq. 8): half the harmonic mean of A = log(1 + Σ_l 1/c_l(X_l)) and
B = log(1 + κ), label-free.

- 1/c_l = σ_min/σ_max of layer l's feature matrix (FMI; 0 when NaN/inf), by `torch.linalg.svdvals`.
- κ: extrinsic curvature (Eq. 5) of the image h(θ) of an input circle g(θ) = r(o0 cos θ + o1 sin θ):
  κ = (v·v)^{-3/2} sqrt((v·v)(a·a) − (v·a)²), v = ∂h/∂θ, a = ∂²h/∂θ², by nested forward-mode AD
  (`torch.func.jvp` twice), so every coordinate of h comes at ~3 forward passes.
Modes (the paper leaves κ's aggregation and the hooked layers open): `parity=True` copies the reference code (hooks on every module incl. containers,
first-sample matrices, one θ = 0, 10 output coordinates drawn with replacement, radius 1, train mode,
κ summed); the default "clean" mode hooks leaf modules, skips per-sample scalars and repeated
outputs, averages κ over `n_theta` evenly spaced θ with all coordinates, eval mode.

CTR adaptation (not in the paper, to be validated):
- FMI: 3-D activations [B, F, d] (field tokens) use the first sample's F×d matrix, as a C×HW conv map;
  2-D activations [B, d] use the batch matrix of the first `fmi_rows` samples (64 by default: the
  sample Gram matrix of Du et al.; an SVD per layer of a 512-row matrix dominated the cost), which needs
  B > 1 but no labels. (Parity mode keeps the per-sample d×1 matrix, which always gives 1.)
- Curvature: ids are discrete, so the circle lies in the continuous space after the lookup (dense
  features + pooled embeddings, `continuous.py`), centred at 0. The curve is mapped to the model
  output when it has several coordinates per sample; a single CTR logit gives a 1-D curve of zero
  curvature, so h is then the input of the last nn.Linear (the last hidden representation, as in
  Poole et al.'s per-layer curvature).
Random draws: a torch.Generator seeded with `seed` draws randn(D, 2) for the circle (QR gives o0, o1),
then, in parity mode, the coordinates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import jvp

from ctrnas.proxies.base import Proxy, math_attention, register
from ctrnas.proxies.continuous import ContinuousInputs, split_like


def fmi(X: torch.Tensor) -> float:
    """σ_min/σ_max of a matrix (0 for NaN/inf, as the reference code)."""
    s = torch.linalg.svdvals(X.detach().float())
    r = float(s.min() / s.max()) if s.numel() else 0.0
    return r if math.isfinite(r) else 0.0


def curvature(v: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """κ per row of v, a [n, H] (Dextr Eq. 5)."""
    v, a = v.double(), a.double()
    vv, aa, va = (v * v).sum(1), (a * a).sum(1), (v * a).sum(1)
    return vv.pow(-1.5) * (vv * aa - va * va).clamp_min(0).sqrt()


@register("dextr")
@dataclass(frozen=True)
class Dextr(Proxy):
    needs_labels = False
    default_mode = "eval"
    parity: bool = False
    n_theta: int = 16
    fmi_rows: int | None = 64   # rows of a 2-D activation's batch matrix (CTR adaptation); None: all
    radius: float = 1.0
    seed: int = 0
    mode: str | None = None

    def _compute(self, model, batches, loss_fn):
        self._set_mode(model, self.mode or ("train" if self.parity else "eval"))
        inputs = batches[0][0]
        a_sum, layers = self._fmi_sum(model, inputs)
        A = math.log1p(a_sum)
        meta = {"fmi_layers": layers}
        try:
            with math_attention():
                kappa = self._curvature(model, inputs, meta)
        except (RuntimeError, ValueError) as e:   # the reference code falls back to A alone
            kappa, meta["curvature_error"] = float("nan"), str(e)
        if not math.isfinite(kappa):
            return A, {"fmi": a_sum, "log_fmi": A, "curvature": kappa}, meta
        B = math.log1p(kappa)
        value = A * B / (A + B) if A + B > 0 else 0.0
        return value, {"fmi": a_sum, "log_fmi": A, "curvature": kappa, "log_curvature": B}, meta

    def _fmi_sum(self, model, inputs):
        outs, seen, keep = [], set(), []   # keep: originals stay alive so their ids are not reused
        mods = list(model.named_modules()) if self.parity else \
            [(n, m) for n, m in model.named_modules() if not any(True for _ in m.children())]

        def hook_for(name):
            def hook(mod, inp, out):
                o = out[0] if isinstance(out, (tuple, list)) else out
                if torch.is_tensor(o) and o.is_floating_point() and (self.parity or id(o) not in seen):
                    seen.add(id(o))
                    keep.append(o)
                    outs.append((name, o.detach()))
            return hook

        handles = [m.register_forward_hook(hook_for(n)) for n, m in mods]
        try:
            with torch.no_grad():
                model(*inputs)
        finally:
            for hd in handles:
                hd.remove()
        total, used = 0.0, []
        for name, o in outs:
            if o.numel() == 0:  # an op with no output tokens (the `none` sparse op: [B, 0, E]) has no features
                continue
            if self.parity:
                fea = o[0]
                X = fea.reshape(fea.shape[0], -1) if fea.ndim else fea.reshape(1, 1)
            elif o.ndim < 2 or o[0].numel() == 1:
                continue
            elif o.ndim == 2:
                X = o if self.fmi_rows is None else o[: self.fmi_rows]
            else:
                X = o[0].reshape(o.shape[1], -1)
            total += fmi(X)
            used.append(name)
        return total, used

    def _curvature(self, model, inputs, meta) -> float:
        ci = ContinuousInputs(model, inputs)
        reps = ci.capture()
        D = sum(r[0].numel() for r in reps)
        # Drawn on the CPU (a CPU generator), then moved: the same circle on every device.
        g = torch.Generator().manual_seed(self.seed)
        Q, _ = torch.linalg.qr(torch.randn(D, 2, generator=g, dtype=torch.float64))
        dev, dtype = reps[0].device, reps[0].dtype
        o0, o1 = Q[:, 0].to(dev, dtype), Q[:, 1].to(dev, dtype)
        n = 1 if self.parity else self.n_theta
        theta = torch.linspace(0, 2 * math.pi, n + 1)[:-1].to(dev)
        with torch.no_grad():
            probe = ci.run(split_like(torch.zeros(1, D, device=dev, dtype=dtype), reps))
        use_output = probe[0].numel() > 1
        store = {}
        handle = None
        if not use_output:
            last = [m for m in model.modules() if isinstance(m, nn.Linear)][-1]
            handle = last.register_forward_pre_hook(lambda m, i: store.__setitem__("f", i[0]))
        meta["curve_space"] = "output" if use_output else "last_linear_input"

        def h(t):
            pts = self.radius * (torch.cos(t)[:, None] * o0 + torch.sin(t)[:, None] * o1)
            out = ci.run(split_like(pts, reps))
            f = out if use_output else store["f"]
            return f.reshape(t.shape[0], -1)

        try:
            if self.parity:
                # The reference code differentiates with autograd (create_graph) in train mode; torch.func
                # refuses BatchNorm's in-place running-stat updates there, so parity uses autograd too.
                t = theta.clone().requires_grad_(True)
                out = h(t)
                idx = torch.randint(out.shape[1], (10,), generator=g)
                vs, as_ = [], []
                for j in idx.tolist():
                    vj = torch.autograd.grad(out[:, j].sum(), t, create_graph=True)[0]
                    aj = torch.autograd.grad(vj.sum(), t, retain_graph=True, allow_unused=True)[0]
                    vs.append(vj)
                    as_.append(torch.zeros_like(vj) if aj is None else aj)
                v, a = torch.stack(vs, 1), torch.stack(as_, 1)
                return float(curvature(v.detach(), a.detach()).sum())

            def dh(t):
                return jvp(h, (t,), (torch.ones_like(t),))[1]

            v = dh(theta)
            a = jvp(dh, (theta,), (torch.ones_like(theta),))[1]
        finally:
            if handle is not None:
                handle.remove()
        return float(curvature(v.detach(), a.detach()).mean())
