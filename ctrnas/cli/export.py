"""`ctrnas export`: a subnet of a supernet checkpoint (or freshly initialised), or a model trained by `ctrnas
train`, -> standalone model folder."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write a standalone model (an architecture with inherited or fresh weights, or a trained model) "
             "with a model card",
        description="Export one architecture as a standalone model: model.pt, model.pt2 (loads with torch alone), "
        "TorchScript dense_part.pt, arch.json and a model card (params, FLOPs, metrics when given); or, with "
        "--trained, the model a `ctrnas train --out FOLDER` trained; or, with --run and --pick, a model of a run's "
        "front (log loss against embedding bytes).",
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--arch", help="architecture JSON file (as written by search or export)")
    what.add_argument("--trained", metavar="FOLDER", help="the --out folder of `ctrnas train` (a baseline or an "
                      "architecture with its trained weights)")
    what.add_argument("--run", metavar="FOLDER", help="a run's folder: export model --pick of its front (front.json)")
    p.add_argument("--pick", type=int, default=None, help="with --run: the front's model number (front.json, "
                   "summary.md; 0 = the fewest embedding bytes)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--overwrite", action="store_true",
                   help="write into an --out folder holding files ctrnas did not write (they are left in place; "
                        "a file of yours where ctrnas writes is refused even then)")
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


def _run(args) -> int:
    from ctrnas.cli.common import check_exist, check_prepared

    from ctrnas.errors import CtrnasError

    check_exist(args.trained, args.supernet, args.metrics, args.run)
    check_prepared(args.data)
    from ctrnas import api

    if args.run:
        if args.pick is None:
            raise CtrnasError("--run needs --pick N (the front's model numbers are in front.json)")
        card = api.export_pick(args.run, args.pick, args.out, torch_export=args.torch_export,
                                overwrite=args.overwrite)
        print(f"exported front pick {args.pick} ({card.get('arch_key') or card.get('baseline')}) to {args.out}: "
              f"{card['params_embedding'] * 4 / 1e6:.2f} MB of embedding tables")
        return 0
    if args.pick is not None:
        raise CtrnasError("--pick goes with --run")
    if args.trained:
        card = api.export_trained(args.trained, args.out, torch_export=args.torch_export,
                                  overwrite=args.overwrite)
        what = card.get("arch_key") or card.get("baseline")
        print(f"exported {what} to {args.out}: {card['params_dense']:,} dense + {card['params_embedding']:,} "
              "embedding params")
        return 0

    card = api.export_arch(args.arch, args.out, supernet=args.supernet, data_dir=args.data, space=args.space,
                           emb_dim=args.emb_dim, row_cap=args.row_cap, init=args.init, seed=args.seed,
                           metrics_path=args.metrics, torch_export=args.torch_export,
                           overwrite=args.overwrite)
    print(f"exported {card['arch_key']} to {args.out}: {card['params_dense']:,} dense params, "
          f"{card['flops_per_example']:,} FLOPs/example")
    return 0
