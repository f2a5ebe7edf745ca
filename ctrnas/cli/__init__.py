"""The `ctrnas` command line: one module per verb, each only parsing arguments and calling `ctrnas.api`.

Each module listed in COMMANDS defines `register(subparsers)`; the handlers import `ctrnas.api` (and through
it torch and torchrec) only when they run, so `ctrnas --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

from ctrnas import __version__
from ctrnas.errors import CtrnasError

# One entry per verb (in `ctrnas --help` order); each module defines register(subparsers).
COMMANDS = [
    "ctrnas.cli.prepare",
    "ctrnas.cli.export",
    "ctrnas.cli.predict",
    "ctrnas.cli.train",
    "ctrnas.cli.warmup",
    "ctrnas.cli.score",
    "ctrnas.cli.vision",
    "ctrnas.cli.demo",
    "ctrnas.cli.run",
    "ctrnas.cli.compare",
    "ctrnas.cli.study",
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
        previous = signal.signal(signal.SIGTERM, _stop)  # SIGTERM unwinds like Ctrl-C: cleanup runs once
    except ValueError:  # not the main thread (an embedding application): leave its handlers alone
        previous = None
    try:
        return int(args.func(args) or 0)
    except CtrnasError as e:
        print(f"ctrnas {args.command}: error: {e}", file=sys.stderr)
        return 1
    except (OSError, RuntimeError) as e:  # a full disk under a writer that does not name it itself
        from ctrnas.files import FULL, disk_full

        if not disk_full(e):
            raise
        where = getattr(e, "filename", None)
        print(f"ctrnas {args.command}: error: {f'{where}: ' if where else ''}cannot write: {FULL}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", signal.SIGINT)
        how = "stopped by SIGTERM" if signum == signal.SIGTERM else "interrupted"
        print(f"ctrnas {args.command}: {how}; re-run the same command to finish", file=sys.stderr)
        return 128 + int(signum)  # the shell's convention: 130 for Ctrl-C, 143 for SIGTERM
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _stop(signum, _frame):
    from ctrnas.errors import Interrupted

    raise Interrupted(signum)


if __name__ == "__main__":
    raise SystemExit(main())
