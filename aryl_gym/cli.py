"""The ``aryl-gym`` command line.

Each subcommand lives in its own module under :mod:`aryl_gym.commands` and defines
``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``; modules are discovered
automatically, so adding a command touches no shared file.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from aryl_gym.config import ConfigError


def build_parser() -> argparse.ArgumentParser:
    import aryl_gym.commands as commands

    parser = argparse.ArgumentParser(
        prog="aryl-gym",
        description="GPU-cluster scheduling simulator and RL environment with capacity loaning.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    mods = []
    for info in pkgutil.iter_modules(commands.__path__):
        if info.name.startswith("_"):
            continue
        mods.append(importlib.import_module(f"aryl_gym.commands.{info.name}"))
    for mod in sorted(mods, key=lambda m: m.NAME):
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except ConfigError as exc:
        print(f"aryl-gym {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"aryl-gym {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
