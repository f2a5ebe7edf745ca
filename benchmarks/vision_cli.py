"""`ctrnas vision ...` alone: the vision subcommands with their own parser, for a machine without TorchRec
(the `ctrnas` console script imports every subsystem). Same handlers and flags as `ctrnas vision`.

    python benchmarks/vision_cli.py vision correlate --device cuda --archs 1000 ...
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    from ctrnas.errors import CtrnasError
    from ctrnas.vision import commands

    parser = argparse.ArgumentParser(prog="ctrnas")
    commands.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args()
    try:
        return int(args.func(args) or 0)
    except CtrnasError as e:
        print(f"ctrnas vision: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # spawned workers import this file as __mp_main__: nothing runs then
    raise SystemExit(main())
