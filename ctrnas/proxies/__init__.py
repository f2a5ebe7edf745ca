"""Training-free proxies: `get_proxy(name, **options).score(model, batches, loss_fn) -> ProxyResult`.

`batches` is a list of `(inputs, target)`; the model is called as `model(*inputs)` (CTR: inputs =
(dense, kjt), target = click labels, loss = BCE-with-logits; CNN: inputs = (x,), target = class ids,
loss = cross-entropy). Higher `value` is better for every proxy; `terms` holds the separate parts and
`meta` the modules/parameters used, batch count, options and time. Scoring never changes the model.

| name | source | labels | cost |
|---|---|---|---|
| sigeo | SiGeo Eq. 7 (+ presets zero_shot / warmup_recsys / warmup_cv; `normalise` option) | yes | k fwd+bwd |
| sigeo_norm | SiGeo with term 1 as means over modules and elements | yes | k fwd+bwd |
| zico | ZiCo (official-code accumulation switch) | yes | k fwd+bwd |
| params, flops, l2_norm | counts / ‖W‖ | no | 0–1 fwd |
| grad_norm, snip, plain, fisher | zero-cost proxies (Abdelfattah et al.) | yes | 1 fwd+bwd |
| grasp | zero-cost GraSP (Hessian–vector product) | yes | 1 fwd + 2 bwd |
| synflow | SynFlow, float64 sign-linearised | no | 1 fwd+bwd |
| jacov, naswot, zen | Mellor et al., Lin et al. | no | 1–2 fwd (+bwd) |
| epe_nas | EPE-NAS (classification only) | class ids | 1 fwd+bwd |
| nasi | NASI ‖mean grad‖² and its constrained fitness | yes (any) | 1 fwd+bwd |
| ntk_trace | Eigen-NAS NTK trace, λ_min / cond / M_KNAS diagnostics | no | per-sample grads |
| hnas | HNAS κ/M (+ μ(M² − ν)²) | no | per-sample grads |
| dextr | Dextr (FMI by SVD + curvature), CTR adaptation | no | 1 fwd + 2 jvp |
"""

from ctrnas.proxies.base import Proxy, ProxyResult, preserved_state, register  # noqa: F401
from ctrnas.proxies.registry import get_proxy, list_proxies  # noqa: F401  (imports every built-in proxy)
