"""`ctrnas predict`: score raw rows (or a prepared dataset folder) with an exported model -> Parquet."""

from __future__ import annotations

import argparse
import sys

from ctrnas.data.readers.formats import format_names


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "predict", help="score raw rows with an exported model: one probability per row, to Parquet",
        description="Score raw rows with an exported model. The rows are read and encoded as `ctrnas prepare` "
        "did for the model's training data (transform.json beside the model); bad rows are rejected as "
        "prepare rejects them (counted, the first ones named). With labels, prints log loss and AUC.")
    p.add_argument("--model", required=True, metavar="DIR",
                   help="exported model folder (ctrnas export, or a run's model/)")
    p.add_argument("--input", required=True, nargs="+", metavar="FILE",
                   help="raw file(s) of the model's format (labels optional), or one prepared dataset folder")
    p.add_argument("--out", required=True, metavar="FILE", help="output Parquet: file, line, probability[, label]")
    p.add_argument("--kind", choices=format_names(), default=None, help="format of the input (default: the model's)")
    p.add_argument("--split", default="test", help="split of a prepared dataset folder to score (default test)")
    p.add_argument("--data", metavar="DIR", help="prepared dataset whose transform to use (a model exported "
                   "without one)")
    p.add_argument("--batch-rows", type=int, default=8192, help="rows per forward pass (default 8192)")
    p.add_argument("--pad-missing-trailing", action="store_true",
                   help="read a row with too few fields as if its missing trailing fields were empty, as `prepare "
                        "--pad-missing-trailing` (default: as the model's data was prepared)")
    p.add_argument("--summary", metavar="FILE", help="also write the summary (rows, rejects, metrics) as JSON")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from ctrnas.cli.common import check_exist

    check_exist(args.model, *args.input, args.data)
    from ctrnas import api

    s = api.predict(args.model, args.input, args.out, kind=args.kind, split=args.split, data_dir=args.data,
                    batch_rows=args.batch_rows, overwrite=args.overwrite, progress=args.progress,
                    summary=args.summary, pad_missing_trailing=args.pad_missing_trailing or None)
    r = s["rows"]
    line = (f"predicted {r['written']:,} rows into {args.out} (read {r['read']:,}, rejected {r['rejected']:,}"
            + (f": {', '.join(f'{k} {v:,}' for k, v in r['rejected_by_reason'].items())}" if r["rejected"] else "")
            + f"; {s['rows_per_second'] or 0:,.0f} rows/s)")
    if s["metrics"]:
        m = {k: "n/a" if s["metrics"].get(k) is None else f"{s['metrics'][k]:.4f}" for k in ("logloss", "auc")}
        line += f"; log loss {m['logloss']}, AUC {m['auc']}"  # n/a: undefined (e.g. the AUC of one class)
    print(line)
    if not s["scored_with"].startswith("model.pt2"):  # the slower start: say why model.pt2 did not serve
        print(f"ctrnas predict: scored with {s['scored_with']}", file=sys.stderr)
    if r.get("padded"):  # pad_missing_trailing of the model's preparation: accepted, but not as written
        print(f"ctrnas predict: warning: filled the missing trailing fields of {r['padded']:,} rows "
              "(pad_missing_trailing)", file=sys.stderr)
    short = [rej for rej in s["first_rejects"] if "--pad-missing-trailing" in (rej["detail"] or "")]
    if short:  # a copy that strips trailing empty fields: say which flag reads those rows
        print(f"ctrnas predict: warning: rows short of their trailing fields were rejected (e.g. {short[0]['file']}, "
              f"line {short[0]['line']}); --pad-missing-trailing reads them as empty", file=sys.stderr)
    for rej in s["first_rejects"][:5]:
        print(f"  rejected {rej['file']}:{rej['line']} {rej['field'] or ''} {rej['detail']}")
    return 0
