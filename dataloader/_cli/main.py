"""The ``dataloader`` command: the argument parser, and the dispatch to each command.

Each command is a module of this package (``bench``, ``info``, ``show``,
``pack``) that registers its own parser; the shared errors and helpers are
in ``common``. ``main(argv)`` returns the exit status instead of exiting,
so the commands run in-process too. Exit status 2 is a usage error (a bad
option, a path that does not exist, a ``--transform`` that does not
parse); 1 is a failure while doing the work (no images found, an
unreadable image, a missing optional dependency). Errors are one line on
stderr, without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from dataloader._cli.bench import add_bench_command
from dataloader._cli.common import error_message
from dataloader._cli.info import add_info_command
from dataloader._cli.pack import add_pack_command
from dataloader._cli.show import add_show_command
from dataloader._errors import CommandError, UsageError

__all__ = ["main"]

_EPILOG = """\
examples:
  dataloader bench                                 256 generated JPEGs, all cores
  dataloader bench train/ --workers 8 --against torch
  dataloader info photo.jpg scans/*.png
  dataloader show train/ --out grid.png --transform "RandomResizedCrop(224), RandomHFlip()"
  dataloader pack train/ shards/ --shard-size 256MB

exit status: 0 success, 1 the work failed (no images, an unreadable image),
2 usage error (bad option, missing path, a --transform that does not parse).
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``dataloader`` command with ``argv`` (default ``sys.argv[1:]``); return its status.

    Examples
    --------
    >>> from dataloader._cli.main import main
    >>> main(["info", "no-such-file.jpg"])
    2
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, or argparse's usage error
        return exit_.code if isinstance(exit_.code, int) else 2
    try:
        return args.run(args)
    except UsageError as err:
        print(f"dataloader {args.command}: error: {err}", file=sys.stderr)
        return 2
    except (CommandError, OSError, ValueError, RuntimeError) as err:
        print(f"dataloader {args.command}: {error_message(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"dataloader {args.command}: interrupted", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dataloader",
        description="Measure the native image pipeline, inspect image headers, "
                    "and look at what an augmentation chain does.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from dataloader import __version__

    parser.add_argument("--version", action="version", version=f"dataloader {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_bench_command(commands)
    add_info_command(commands)
    add_show_command(commands)
    add_pack_command(commands)
    return parser
