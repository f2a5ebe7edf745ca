"""EPE-NAS (Lopes et al. 2021), classification only: input Jacobians grouped by class; per class c,
s_c = Σ log(|corr(J_c)| + k); score = Σ_{c,c'} |s_c − s_c'| / #classes (the official code's branch for
≤ 100 classes, used here for every class count). The Jacobian is that of Σ outputs w.r.t. the input, as
in the official `get_batch_jacobian`. Needs integer class labels: CTR's float click labels raise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctrnas.errors import CtrnasError
from ctrnas.proxies.base import Proxy, register
from ctrnas.proxies.jacov import input_jacobian


def epe_score(J: np.ndarray, labels: np.ndarray, k: float = 1e-5) -> float:
    per_class = {}
    for c in np.unique(labels):
        corrs = np.corrcoef(J[labels == c])
        per_class[c] = float(np.sum(np.log(np.abs(corrs) + k)))
    s = np.array(list(per_class.values()))
    return float(np.abs(s[:, None] - s[None, :]).sum() / len(s)) if len(s) else 0.0


@register("epe_nas")
@dataclass(frozen=True)
class EpeNas(Proxy):
    needs_labels = False
    mode: str = "train"

    def _compute(self, model, batches, loss_fn):
        target = batches[0][1]
        if target.is_floating_point():
            raise CtrnasError("proxy epe_nas: needs integer class labels (classification only); "
                              f"got {target.dtype} targets")
        self._set_mode(model)
        J, names = input_jacobian(model, batches[0])
        labels = target.cpu().numpy()
        v = epe_score(J.detach().double().cpu().numpy(), labels)
        return v, {"epe_nas": v}, {"inputs": names, "classes": int(len(np.unique(labels)))}
