"""Search checkpoints: one pickle per search, replaced atomically after every generation.

A checkpoint holds the strategy's state (population, seen keys, generation, RNG state), the history,
the score cache and a fingerprint of the configuration; resuming under a different configuration
would silently produce a different search, so it is refused.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from ctrnas.errors import CtrnasError
from ctrnas.files import atomic_write_bytes

FORMAT_VERSION = 1


class CheckpointError(CtrnasError):
    """A checkpoint that cannot be read or does not belong to this search."""


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Write `state` to `path` so that a crash mid-write leaves the previous checkpoint intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, pickle.dumps({"format_version": FORMAT_VERSION, **state}, protocol=pickle.HIGHEST_PROTOCOL),
                       fsync=True)


def load_checkpoint(path: str | Path, fingerprint: dict[str, Any]) -> dict[str, Any]:
    """Read a checkpoint written by `save_checkpoint` and check it was made by the same search setup."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            state = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError) as e:
        raise CheckpointError(f"{path}: cannot read checkpoint: {e}") from None
    if state.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{path}: checkpoint format {state.get('format_version')!r}, expected {FORMAT_VERSION}")
    if state.get("fingerprint") != fingerprint:
        raise CheckpointError(
            f"{path}: checkpoint was written by a different search setup "
            f"({state.get('fingerprint')!r} != {fingerprint!r}); delete it or use another path"
        )
    return state
