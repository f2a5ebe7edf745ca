"""Training checkpoints: model, optimizer states, step counters and the recipe, written atomically.

A run folder may come from someone else, so a checkpoint holds tensors and plain values only and is read
with `torch.load(weights_only=True)`: it never runs code from the file.

A checkpoint taken after step k holds everything the trainer's state depends on (the LR is a pure
function of the step, per-step randomness is derived from (seed, step), and batch sources replay the
same order), so resuming from it reproduces an uninterrupted run bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ctrnas.errors import CtrnasError
from ctrnas.safeload import load_weights_file, save_weights_file

FORMAT = "ctrnas-checkpoint/1"
FILE = "checkpoint.pt"  # the trainer's checkpoint in its out_dir


def save_checkpoint(path: str | Path, state: dict) -> None:
    """Write `state` to `path` via a temp file and rename, so a crash never leaves half a checkpoint."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_weights_file({"format": FORMAT, **state}, path, "checkpoint")


def load_checkpoint(path: str | Path, mmap: bool = False) -> dict:
    """Read a checkpoint written by `save_checkpoint`; a clear error if it is not one. `mmap`: its tensors
    are read from the file when used (a look at their shapes reads next to nothing)."""
    path = Path(path)
    state = load_weights_file(path, "checkpoint", mmap=mmap)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CtrnasError(f"{path}: not a ctrnas checkpoint (expected format {FORMAT!r})")
    missing = [k for k in ("model", "optimizers", "step", "config") if k not in state]
    if missing:
        raise CtrnasError(f"{path}: damaged ctrnas checkpoint (no {', '.join(missing)})")
    return state


def state_tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    """The model's state as plain local tensors that share storage with it (sharded tables: this rank's
    shards), so a copy can be written back in place."""
    out = []
    for v in model.state_dict().values():
        if hasattr(v, "local_shards"):      # torch ShardedTensor (TorchRec's sharded tables)
            out.extend(sh.tensor for sh in v.local_shards())
        elif hasattr(v, "to_local"):        # DTensor
            out.append(v.to_local())
        elif isinstance(v, torch.Tensor):
            out.append(v)
    return out
