"""Baseline names as recipes write them, without importing torch (a recipe is checked before anything runs):
`final.baselines: [lr, lr*8, dlrm]` names `ctrnas.train.baselines.BASELINES`, "*S" trains one at S times the
run's learning rate."""

from __future__ import annotations

import math

from ctrnas.errors import RecipeError

BASELINE_NAMES = ("lr", "fm", "dlrm", "deepfm", "xdeepfm", "autoint+", "dcnv2")  # BASELINES' keys, in order


def baseline_key(name: str) -> str | None:
    """The BASELINES key of `name` ("AutoInt" -> "autoint+"), None when it names none."""
    key = name.lower().replace("-", "").replace("_", "")
    key = {"autoint": "autoint+", "autointplus": "autoint+"}.get(key, key)
    return key if key in BASELINE_NAMES else None


def split_lr_scale(spec: str) -> tuple[str, float]:
    """("lr", 8.0) of "lr*8", a baseline trained at 8 times the run's learning rate (LR's one-wide tables want
    a far larger step than the deep models' tables); (spec, 1.0) of a plain name."""
    name, star, scale = spec.partition("*")
    if not star:
        return spec, 1.0
    try:
        value = float(scale)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise RecipeError("final.baselines", spec, f"expected NAME*S with S a positive number (lr*8: LR at 8x "
                                                   f"the learning rate), got {scale!r} after '*'")
    return name, value
