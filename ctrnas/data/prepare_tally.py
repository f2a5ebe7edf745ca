"""A preparation's counts (rows read, accepted, rejected per reason, written per split), its rejects file
and the readable summary of a finished one."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ctrnas.data.dataset import SPLITS
from ctrnas.data.ownership import REJECTS_FILE
from ctrnas.data.prepare_config import PrepareConfig
from ctrnas.data.readers.base import Reject
from ctrnas.errors import DataFormatError
from ctrnas.files import atomic_write_text


class Tally:
    """Rows read/accepted/rejected/written, per reason and per split."""

    def __init__(self, cfg: PrepareConfig):
        self.cfg = cfg
        self.accepted = self.blank = self.written = self.padded = 0
        self.by_reason: dict[str, int] = {}
        self.kept: list[Reject] = []
        self.rows = np.zeros(3, dtype=np.int64)
        self.clicks = np.zeros(3, dtype=np.float64)

    def rejects(self, rejects: list[Reject]) -> None:
        if not rejects:
            return
        if self.cfg.on_error == "raise":
            raise rejects[0].error()
        for r in rejects:
            self.by_reason[r.reason] = self.by_reason.get(r.reason, 0) + 1
        self.kept.extend(rejects[:max(0, self.cfg.max_rejects - len(self.kept))])

    def meta(self) -> dict:
        rejected = sum(self.by_reason.values())
        out = {"read": self.accepted + rejected, "accepted": self.accepted, "rejected": rejected,
               "rejected_by_reason": dict(sorted(self.by_reason.items())), "written": self.written,
               "blank_lines": self.blank}
        if self.cfg.pad_missing_trailing:
            out["padded"] = self.padded  # accepted rows read with missing trailing fields filled as empty
        return out


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def write_rejects(out: Path, rejects: list[Reject]) -> None:
    lines = ["file\tline\tfield\treason\tdetail\ttext"]
    lines += ["\t".join([_escape(r.file), str(r.line), r.field or "", r.reason, _escape(r.detail), _escape(r.text)])
              for r in rejects]
    atomic_write_text(out / REJECTS_FILE, "\n".join(lines) + "\n")


def check_rows(inputs: list[str], out: Path, tally: "Tally") -> None:
    """No dataset from no rows: every row of the input was rejected (empty files fail in the reader)."""
    if tally.accepted:
        return
    rows = tally.meta()
    reasons = ", ".join(f"{k} {v:,}" for k, v in rows["rejected_by_reason"].items())
    where = f"; the first ones are in {out / REJECTS_FILE}" if tally.kept else ""
    raise DataFormatError(", ".join(inputs), None, None,
                          f"no rows left to prepare: all {rows['rejected']:,} rows read were rejected ({reasons}){where}")


def summary(meta: dict, out: str | Path) -> str:
    """One readable paragraph about a finished preparation."""
    rows = meta["rows"]
    parts = [f"{s} {meta['splits'][s]['rows']:,} rows (CTR {meta['splits'][s]['ctr']:.4f})"
             if meta["splits"][s]["ctr"] is not None else f"{s} 0 rows" for s in SPLITS]
    text = (f"Prepared {meta['source']['format']} from {len(meta['source']['inputs'])} file(s) into {out}: "
            f"read {rows['read']:,} rows, accepted {rows['accepted']:,}, rejected {rows['rejected']:,}")
    if rows["rejected"]:
        reasons = ", ".join(f"{k} {v:,}" for k, v in rows["rejected_by_reason"].items())
        text += f" ({reasons}; first ones in {Path(out) / REJECTS_FILE})"
    if rows["blank_lines"]:
        text += f", skipped {rows['blank_lines']:,} blank lines"
    if rows.get("padded"):
        text += f", filled the missing trailing fields of {rows['padded']:,} rows"
    text += f"; wrote {rows['written']:,}: " + ", ".join(parts)
    text += (f". {len(meta['schema']['dense'])} dense ({meta['settings']['dense_transform']}), "
             f"{len(meta['schema']['sparse'])} sparse ({meta['settings']['sparse_encoding']}), "
             f"split {meta['split']['method']}; {meta['seconds']:.1f} s.")
    return text
