"""The `ctrnas` command line: a thin layer over the Python API.

Each subsystem contributes its subcommands through a `register(subparsers)` function in the module
listed in COMMANDS; heavy imports (torch, torchrec) happen inside the handlers so `--help` is fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ctrnas import __version__
from ctrnas.errors import CtrnasError

# One entry per subsystem; each module defines register(subparsers).
COMMANDS = [
    "ctrnas.data.commands",
    "ctrnas.supernet.commands",
    "ctrnas.train.commands",
    "ctrnas.proxies.commands",
    "ctrnas.vision.commands",
    "ctrnas.pipeline.commands",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctrnas",
        description="Neural architecture search for CTR models: prepare data, warm up a NASRec supernet, "
        "score subnets with training-free proxies, search, and train the best from scratch.",
    )
    parser.add_argument("--version", action="version", version=f"ctrnas {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except CtrnasError as e:
        print(f"ctrnas {args.command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"ctrnas {args.command}: interrupted; re-run the same command to finish", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
