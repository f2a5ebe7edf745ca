"""Raw-format readers: one file per format, each streaming RawBatches (see base.py), declared in `formats.py`."""

from __future__ import annotations


def make_reader(kind: str, paths: list[str], cfg):
    """The reader of format `kind` (`formats.get_format`) over `paths` with PrepareConfig `cfg`."""
    from ctrnas.data.readers.formats import get_format

    return get_format(kind).make_reader(paths, cfg)
