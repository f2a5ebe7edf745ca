"""Hand-crafted CTR baselines on the shared embedding stem: the rows of SiGeo's Table 5 and BARS refs.

Every model takes (schema, dim, row_cap) and maps (dense, kjt) -> logits [B].
"""

from __future__ import annotations

import torch
from torch import nn

from ctrnas.data.schema import DatasetSchema
from ctrnas.errors import RecipeError
from ctrnas.train.baseline_names import baseline_key
from ctrnas.train.baselines.autoint import AutoIntPlus
from ctrnas.train.baselines.dcnv2 import DCNv2
from ctrnas.train.baselines.deepfm import DeepFM
from ctrnas.train.baselines.dlrm import DLRM
from ctrnas.train.baselines.fm import FM
from ctrnas.train.baselines.lr import LR
from ctrnas.train.baselines.xdeepfm import XDeepFM

BASELINES: dict[str, type[nn.Module]] = {
    "lr": LR, "fm": FM, "dlrm": DLRM, "deepfm": DeepFM, "xdeepfm": XDeepFM, "autoint+": AutoIntPlus,
    "dcnv2": DCNv2,
}


def build_baseline(name: str, schema: DatasetSchema, dim: int = 16, row_cap: int | None = None,
                   seed: int = 0) -> nn.Module:
    """Baseline `name` with its weights drawn from `seed` (the global RNG is forked and left untouched)."""
    key = baseline_key(name)
    if key is None:
        raise RecipeError("--baseline", "name", f"unknown baseline {name!r} (known: {', '.join(BASELINES)})")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return BASELINES[key](schema, dim=dim, row_cap=row_cap)
