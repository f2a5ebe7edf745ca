"""The weights a `ctrnas train --out T` folder holds, whichever form its model.pt has (a state_dict, or the whole
module ctrnas wrote before exports held weights only)."""

from __future__ import annotations

import pickle
from pathlib import Path

import torch


def trained_state(folder: Path) -> dict:
    try:
        return torch.load(Path(folder) / "model.pt", weights_only=True)
    except pickle.UnpicklingError:  # a pickled module: loaded the way ctrnas loads its own exports
        from ctrnas.supernet import load_exported

        return load_exported(folder).state_dict()
