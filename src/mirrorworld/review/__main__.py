"""``python -m mirrorworld.review SUBCOMMAND ...``: the ``review`` command on its own."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mirrorworld.errors import MirrorworldError
from mirrorworld.review.cli import inert, register


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mirrorworld.review")
    sub = parser.add_subparsers(dest="command", required=True)
    handlers = register(sub)
    args = parser.parse_args(["review", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(handlers[args.command](args))
    except MirrorworldError as err:
        print(f"mirrorworld: error: {inert(err, 2000)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
