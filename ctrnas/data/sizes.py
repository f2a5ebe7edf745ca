"""The sizes a model card asks for, checked before anything is built: a model folder may come from anyone, and
its card says how large the tables are (the schema's cardinalities, the row cap, `emb_dim` or a baseline's
`build.dim`). The weights file says how large they really are; the card must agree with it, stay under the
limits below, and fit in the memory available, or the folder is refused with one line before any allocation.
"""

from __future__ import annotations

import re
from pathlib import Path

from ctrnas.errors import DamagedFile, NotEnoughMemory

DIM_LIMIT = 4096  # embedding width of any table (NASRec's and the baselines' are 16..64)
ROW_LIMIT = 1 << 36  # rows of one table (Criteo 1TB's largest field has about 4e7)
_TABLE = re.compile(r"(?:^|\.)t_(.+)\.weight$")  # ctrnas.supernet.stem: one table per field, "t_NAME"


def _count(value, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def check_card_sizes(card_path: str | Path, schema_json, dim, row_cap, state: dict, weights_path: str | Path,
                     dim_key: str = "emb_dim") -> None:
    """Refuse a card whose sizes disagree with `state` (the weights file's tensors, memory-mapped: their shapes
    cost nothing), pass the limits, or would not fit in memory; call before building the model."""
    if not _count(dim, 1, DIM_LIMIT):
        raise DamagedFile(card_path, f"{dim_key} {dim!r}: not a width in 1..{DIM_LIMIT}")
    if row_cap is not None and not _count(row_cap, 1, ROW_LIMIT):
        raise DamagedFile(card_path, f"row_cap {row_cap!r}: not a row count in 1..{ROW_LIMIT:,}")
    try:
        fields = [(str(f["name"]), f["cardinality"]) for f in schema_json["sparse"]]
    except (KeyError, TypeError) as e:
        raise DamagedFile(card_path, f"its schema lists no sparse fields with names and cardinalities ({e})") from None
    if not isinstance(state, dict):
        raise DamagedFile(weights_path, "not a state_dict (tensors by name)")
    rows = {}
    for name, card in fields:
        if not _count(card, 0, ROW_LIMIT) and row_cap is None:
            raise DamagedFile(card_path, f"field {name}: cardinality {card!r} is not a row count in "
                              f"0..{ROW_LIMIT:,}")
        if not isinstance(card, int) or isinstance(card, bool) or card < 0:
            raise DamagedFile(card_path, f"field {name}: cardinality {card!r} is not a row count")
        rows[name] = max(min(card, row_cap) if row_cap else card, 1)
    for key, t in state.items():
        m = _TABLE.search(key)
        if m is None or getattr(t, "dim", lambda: 0)() != 2:
            continue
        name, (n, width) = m.group(1), tuple(t.shape)
        if name not in rows:
            raise DamagedFile(weights_path, f"table {key} is of no sparse field of {card_path}'s schema")
        if n != rows[name]:
            raise DamagedFile(card_path, f"field {name}: the card asks for {rows[name]:,} rows, the weights' table "
                              f"{key} has {n:,}")
        if width > dim:
            raise DamagedFile(card_path, f"{dim_key} {dim} is narrower than the weights' table {key} ({width})")
    need = sum(rows.values()) * (dim + 1) * 4  # the tables at full width and the first-order ones, float32
    import psutil

    room = psutil.virtual_memory().available
    if need > room:
        raise NotEnoughMemory(f"{card_path}: the model's tables need {need / 1e9:.1f} GB, {room / 1e9:.1f} GB "
                              "available; load it on a larger machine")
