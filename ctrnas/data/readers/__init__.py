"""Raw-format readers: one file per format, each streaming RawBatches (see base.py)."""

from __future__ import annotations

FORMATS = ("criteo", "avazu", "kdd2012", "table")


def make_reader(kind: str, paths: list[str], cfg):
    """The reader of format `kind` over `paths` with PrepareConfig `cfg`."""
    if kind == "criteo":
        from ctrnas.data.readers.criteo import CriteoReader

        return CriteoReader(paths, cfg)
    if kind == "avazu":
        from ctrnas.data.readers.avazu import AvazuReader

        return AvazuReader(paths, cfg)
    if kind == "kdd2012":
        from ctrnas.data.readers.kdd2012 import KddReader

        return KddReader(paths, cfg)
    if kind == "table":
        from ctrnas.data.readers.table import make_table_reader

        return make_table_reader(paths, cfg)
    raise ValueError(f"unknown format {kind!r} (known: {', '.join(FORMATS)})")
