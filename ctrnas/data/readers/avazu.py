"""Avazu (Kaggle CTR prediction 2014) `train` CSV: a header line, then id, click, hour, C1, ..., C21.

`id` is an unsigned 64-bit number (it exceeds int64), so every column is read as text. Numeric columns are
keyed by their decimal value (negative ones, e.g. C20 = -1, as 64-bit two's complement), the hashed
site/app/device columns by their hex value. `hour` is YYMMDDHH: a category as is (NASRec, AutoCTR), or, with
`avazu_hour: split`, three categories hour_of_day (0-23), weekday (0 = Monday) and is_weekend (BARS x4).
NASRec's pseudo dense feature `dense_0` (always 0) is added unless `avazu_pseudo_dense: false`.
"""

from __future__ import annotations

import gzip

import numpy as np

from ctrnas.data.readers.records import first_line
from ctrnas.data.readers.values import show
from ctrnas.data.readers.rows import DelimitedReader, Problems
from ctrnas.errors import DataFormatError

COLUMNS = ["id", "click", "hour", "C1", "banner_pos", "site_id", "site_domain", "site_category", "app_id",
           "app_domain", "app_category", "device_id", "device_ip", "device_model", "device_type",
           "device_conn_type", "C14", "C15", "C16", "C17", "C18", "C19", "C20", "C21"]
HEX = {"site_id", "site_domain", "site_category", "app_id", "app_domain", "app_category", "device_id",
       "device_ip", "device_model"}
HOUR_FEATURES = ("hour_of_day", "weekday", "is_weekend")


def hour_parts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(hour of day, weekday with Monday = 0, is_weekend, valid) of YYMMDDHH integers (years 20YY)."""
    v = values.astype(np.int64)
    yy, mm, dd, hh = v // 1_000_000, v // 10_000 % 100, v // 100 % 100, v % 100
    valid = (v >= 0) & (v < 100_000_000) & (mm >= 1) & (mm <= 12) & (dd >= 1) & (hh <= 23)
    month = np.datetime64("2000-01", "M") + np.where(valid, yy * 12 + mm - 1, 0).astype("timedelta64[M]")
    day = month.astype("datetime64[D]") + np.where(valid, dd - 1, 0).astype("timedelta64[D]")
    valid &= (day.astype("datetime64[M]") == month)  # rejects 31 April and the like
    weekday = (day - np.datetime64("1970-01-05", "D")).astype(np.int64) % 7  # 1970-01-05 was a Monday
    return hh, weekday, (weekday >= 5).astype(np.int64), valid


class AvazuReader(DelimitedReader):
    format = "avazu"
    label_column = "click"

    def __init__(self, paths: list[str], cfg):
        features = [c for c in COLUMNS if c != "click" and not (c == "id" and cfg.avazu_drop_id)]
        sparse = [(c, "hex" if c in HEX else "dec") for c in features]
        dense = []
        super().__init__(paths, cfg, COLUMNS, dense, sparse, delimiter=",", header=True)
        self._hour = self.sparse_names.index("hour")
        if cfg.avazu_hour == "split":
            self.keys_always = frozenset({"hour"})
            names = list(self.sparse_names)
            self.sparse_names = tuple(names[:self._hour] + list(HOUR_FEATURES) + names[self._hour + 1:])
        self.dense_names = ("dense_0",) if cfg.avazu_pseudo_dense else ()

    def check_header(self, path: str) -> None:
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        with (gzip.open(path, "rb") if gz else open(path, "rb")) as f:
            first = f.readline().decode("utf-8", "replace").rstrip("\r\n")
        got = first.split(",")
        if got != COLUMNS:
            raise DataFormatError(path, 1, None, f"Avazu header must be {','.join(COLUMNS)}; got {first[:300]!r}"
                                  " (the Kaggle `test` file has no click column and cannot be prepared)")

    def derive(self, table, dense, keys, missing, problems: Problems):
        n = keys.shape[1]
        dense = np.zeros((len(self.dense_names), n))  # the pseudo dense feature is 0 (never missing)
        if self.cfg.avazu_hour != "split":
            return dense, keys, missing
        h = self._hour
        hh, wd, we, valid = hour_parts(keys[h].view(np.int64))
        col = table.column("hour")
        problems.add(~valid & ~missing[h], "hour", "bad_hour",
                     lambda i: f"hour must be YYMMDDHH, got {show(col, i)!r}")
        parts = np.stack([hh, wd, we]).astype(np.uint64)
        part_missing = np.repeat(missing[h:h + 1], 3, axis=0)
        keys = np.concatenate([keys[:h], parts, keys[h + 1:]])
        missing = np.concatenate([missing[:h], part_missing, missing[h + 1:]])
        return dense, keys, missing

    def describe(self) -> dict:
        return {"format": "avazu", "hour": self.cfg.avazu_hour, "drop_id": self.cfg.avazu_drop_id,
                "pseudo_dense": self.cfg.avazu_pseudo_dense}


def has_labels(cfg, path: str) -> bool:
    """Whether an Avazu file holds the label column: its header names `click`."""
    return "click" in [c.strip() for c in first_line(path).split(",")]
