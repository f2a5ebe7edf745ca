"""`ctrnas export`: a subnet of a supernet checkpoint (or freshly initialised) -> standalone model folder."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write a standalone model of one architecture (inherited or fresh weights) with a model card",
        description="Export one architecture as a standalone model: model.pt, TorchScript dense_part.pt, "
        "arch.json and a model card (params, FLOPs, metrics when given).",
    )
    p.add_argument("--arch", required=True, help="architecture JSON file (as written by search or export)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--supernet", help="supernet checkpoint to inherit weights from: a ctrnas-supernet/1 file, "
                   "or a bare state_dict (then --data and --space say its shapes)")
    p.add_argument("--data", help="prepared dataset folder (meta.json gives the schema): needed without "
                   "--supernet (fresh weights) or with a bare state_dict")
    p.add_argument("--space", default="nasrec-full", help="space name or YAML file (default nasrec-full)")
    p.add_argument("--emb-dim", type=int, default=None, help="embedding dim (default: the space's)")
    p.add_argument("--row-cap", type=int, default=None, help="per-table row cap the supernet was built with")
    p.add_argument("--init", choices=("inherit", "fresh"), default=None,
                   help="inherit supernet weights (default with --supernet) or re-initialise (forced without)")
    p.add_argument("--torch-export", action="store_true",
                   help="also write dense_part.pt2 (torch.export program; takes a few seconds)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fresh initialisation")
    p.add_argument("--metrics", help="JSON file of metrics to put in the model card")
    p.set_defaults(func=_run)


def _space_arg(value: str):
    from pathlib import Path

    from ctrnas.config import load_yaml

    if value.endswith((".yaml", ".yml")) or Path(value).is_file():
        return load_yaml(value)
    return value


def _read_json(path: str, what: str):
    from ctrnas.errors import CtrnasError

    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise CtrnasError(f"{path}: cannot read {what}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise CtrnasError(f"{path}: {what} is not valid JSON: {e}") from None


def _run(args) -> int:
    from ctrnas.data.dataset import load_schema
    from ctrnas.errors import ArchValidationError, CtrnasError
    from ctrnas.space import Arch
    from ctrnas.supernet.export import export
    from ctrnas.supernet.io import load_supernet, save_exported
    from ctrnas.supernet.supernet import Supernet

    try:
        arch = Arch.from_json(_read_json(args.arch, "architecture"))
    except ArchValidationError as e:
        raise CtrnasError(f"{args.arch}: {e}") from None
    schema = load_schema(args.data) if args.data else None
    if args.supernet:
        supernet, _ = load_supernet(args.supernet, schema=schema, space=_space_arg(args.space),
                                    emb_dim=args.emb_dim, row_cap=args.row_cap)
        init, source = args.init or "inherit", args.supernet
    elif schema is None:
        raise CtrnasError("give --supernet (inherited weights) or --data (fresh weights)")
    elif args.init == "inherit":
        raise CtrnasError("--init inherit needs --supernet")
    else:
        supernet = Supernet(schema, _space_arg(args.space), emb_dim=args.emb_dim, row_cap=args.row_cap)
        init, source = "fresh", None
    try:
        supernet.space.validate(arch)
    except ArchValidationError as e:
        raise CtrnasError(f"{args.arch}: {e}") from None
    metrics = _read_json(args.metrics, "metrics") if args.metrics else None
    model = export(supernet, arch, init=init, seed=args.seed)
    card = save_exported(model, args.out, init=init, metrics=metrics, source=source, torch_export=args.torch_export)
    print(f"exported {card['arch_key']} to {args.out}: {card['params_dense']:,} dense params, "
          f"{card['flops_per_example']:,} FLOPs/example")
    return 0
