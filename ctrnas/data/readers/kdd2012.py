"""KDD Cup 2012 track 2 `training.txt`: 12 tab-separated fields, no header, one row per (ad, query, user)
with its click and impression counts:

  Click Impression DisplayURL AdID AdvertiserID Depth Position QueryID KeywordID TitleID DescriptionID UserID

label = Click > 0 (NASRec, AutoCTR); dense: Impression, Depth, Position; the 8 id columns are categories
keyed by their decimal value (DisplayURL is an unsigned 64-bit number). Options:
  kdd_expand_impressions  one output row per impression: Click rows labelled 1, Impression - Click rows 0
                          (the per-impression click log the counts summarise)
  kdd_profile             join `userid_profile.txt` (UserID Gender Age, tab-separated) -> sparse Gender,
                          Age; a user without a profile gets the missing id 0 in both
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from ctrnas.data.readers.base import open_input
from ctrnas.data.readers.values import parse_numbers, show
from ctrnas.data.readers.rows import DelimitedReader, Problems
from ctrnas.errors import DataFormatError

COLUMNS = ["Click", "Impression", "DisplayURL", "AdID", "AdvertiserID", "Depth", "Position", "QueryID",
           "KeywordID", "TitleID", "DescriptionID", "UserID"]
DENSE = ["Impression", "Depth", "Position"]
SPARSE = ["DisplayURL", "AdID", "AdvertiserID", "QueryID", "KeywordID", "TitleID", "DescriptionID", "UserID"]


def load_profile(path: str) -> tuple[np.ndarray, np.ndarray]:
    """(sorted user keys, [n, 2] gender/age keys) of userid_profile.txt, held as compact numpy arrays."""
    with open_input(path) as stream:
        try:
            t = pacsv.read_csv(stream, read_options=pacsv.ReadOptions(column_names=["UserID", "Gender", "Age"]),
                               parse_options=pacsv.ParseOptions(delimiter="\t"),
                               convert_options=pacsv.ConvertOptions(
                                   column_types={"UserID": pa.uint64(), "Gender": pa.int64(), "Age": pa.int64()}))
        except pa.ArrowInvalid as e:
            raise DataFormatError(path, None, None, f"not a UserID<TAB>Gender<TAB>Age file: {e}") from None
    users = np.asarray(t.column("UserID").fill_null(0))
    vals = np.stack([np.asarray(t.column(c).fill_null(0)) for c in ("Gender", "Age")], axis=1).view(np.uint64)
    order = np.argsort(users, kind="stable")
    return users[order], vals[order]


class KddReader(DelimitedReader):
    format = "kdd2012"
    label_column = "Click"
    keys_always = frozenset({"UserID"})

    def __init__(self, paths: list[str], cfg):
        super().__init__(paths, cfg, COLUMNS, DENSE, [(c, "dec") for c in SPARSE], delimiter="\t")
        self._profile = None
        if cfg.kdd_profile:
            self._profile = load_profile(cfg.kdd_profile)
            self.sparse_names = self.sparse_names + ("Gender", "Age")

    def parse_label(self, table: pa.RecordBatch, problems: Problems) -> np.ndarray:
        counts = {}
        for name in ("Click", "Impression"):
            col = table.column(name)
            vals, bad, nonfinite = parse_numbers(col)
            wrong = bad | nonfinite | (~np.isnan(vals) & ((vals < 0) | (vals != np.floor(vals))))
            problems.add(np.asarray(col.is_null()), name, f"missing_{name.lower()}", lambda i, n=name: f"missing {n}")
            problems.add(wrong, name, f"bad_{name.lower()}",
                         lambda i, c=col, n=name: f"{n} must be a count (integer >= 0), got {show(c, i)!r}")
            counts[name] = np.nan_to_num(vals).astype(np.int64)
        clicks, imps = counts["Click"], counts["Impression"]
        problems.add(clicks > imps, "Click", "clicks_exceed_impressions",
                     lambda i: f"Click {clicks[i]} > Impression {imps[i]}")
        if self.cfg.kdd_expand_impressions:
            problems.add(imps < 1, "Impression", "bad_impression",
                         lambda i: f"Impression must be >= 1 to expand, got {imps[i]}")
        self._counts = (clicks, imps)
        return (clicks > 0).astype(np.float32)

    def derive(self, table, dense, keys, missing, problems):
        if self._profile is None:
            return dense, keys, missing
        users, vals = self._profile
        user = keys[SPARSE.index("UserID")]
        pos = np.minimum(np.searchsorted(users, user), max(len(users) - 1, 0))
        found = (users[pos] == user) & ~missing[SPARSE.index("UserID")] if len(users) else np.zeros(len(user), bool)
        extra = np.where(found[None, :], vals[pos].T if len(users) else 0, 0).astype(np.uint64)
        keys = np.concatenate([keys, extra])
        missing = np.concatenate([missing, np.repeat(~found[None, :], 2, axis=0)])
        return dense, keys, missing

    def expand(self, table, keep, labels, dense, keys, missing):
        if not self.cfg.kdd_expand_impressions or not keep.any():
            return labels, dense, keys, missing
        clicks, imps = self._counts[0][keep], self._counts[1][keep]
        rows = np.repeat(np.arange(len(imps)), imps)
        start = np.repeat(np.cumsum(imps) - imps, imps)
        within = np.arange(len(rows)) - start
        labels = (within < np.repeat(clicks, imps)).astype(np.float32)
        return labels, dense[:, rows], keys[:, rows], missing[:, rows]

    def describe(self) -> dict:
        return {"format": "kdd2012", "label": "Click > 0", "expand_impressions": self.cfg.kdd_expand_impressions,
                "profile": self.cfg.kdd_profile}
