"""The ``aryl-gym`` command line.

Each subcommand lives in its own module under :mod:`aryl_gym.commands` and defines
``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``; modules are discovered
automatically, so adding a command touches no shared file.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence

from aryl_gym.config import ConfigError

try:  # imported up front: under a tight memory limit a late import can fail itself
    import resource
except ImportError:  # pragma: no cover - not POSIX
    resource = None  # type: ignore[assignment]


def build_parser() -> argparse.ArgumentParser:
    # at run time: aryl-gym imports every command module to build its parser
    import aryl_gym.commands as commands

    parser = argparse.ArgumentParser(
        prog="aryl-gym",
        description="GPU-cluster scheduling simulator and RL environment with capacity loaning.",
    )
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym import __version__

    parser.add_argument("--version", action="version", version=f"aryl-gym {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    mods = []
    for info in pkgutil.iter_modules(commands.__path__):
        if info.name.startswith("_"):
            continue
        mods.append(importlib.import_module(f"aryl_gym.commands.{info.name}"))
    for mod in sorted(mods, key=lambda m: m.NAME):
        # argparse %-formats help strings (not descriptions): a literal % must be doubled
        # no prefix matching of long options: reproduce --seed 3 was read as --seeds 3 (a count)
        p = sub.add_parser(mod.NAME, help=mod.HELP.replace("%", "%%"), description=mod.HELP,
                           allow_abbrev=False)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    out_of_memory = False
    try:
        return int(args._run(args) or 0)
    except ConfigError as exc:
        print(f"aryl-gym {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"aryl-gym {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        out_of_memory = True  # reported below, once the failed frames are released
    except ModuleNotFoundError as exc:
        # an optional extra that is not installed: name it (exit 2), never a traceback
        from aryl_gym.extras import missing_extra

        msg = missing_extra(exc)
        if msg is None:
            raise
        print(f"aryl-gym {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except ImportError as exc:
        # a C extension that cannot be mapped under a memory limit
        if "failed to map" not in str(exc) and "Cannot allocate memory" not in str(exc):
            raise
        out_of_memory = True
    except BrokenPipeError:
        # the reader went away (``aryl-gym simulate --json | head``): not an error of ours
        try:
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, sys.stdout.fileno())  # nothing more reaches the closed pipe at exit
        except (OSError, ValueError):  # pragma: no cover - stdout without a descriptor
            pass
        return 141  # 128 + SIGPIPE, as a shell reports a command ended by a closed pipe
    except OSError as exc:
        if exc.filename is None:
            raise
        print(
            f"aryl-gym {args.command}: error: {exc.filename}: {exc.strerror or exc}; "
            "check the path and its permissions",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    if out_of_memory:
        gc.collect()
        print(f"aryl-gym {args.command}: error: {memory_message(args)}", file=sys.stderr)
    return 2


#: (address space, resident) MB one ``simulate`` episode needs per scenario: resident measured
#: with ``/usr/bin/time -f %M``, address space as the smallest ``ulimit -v`` that runs (rounded up)
MEMORY_NEEDED_MB = {"tiny": (200, 50), "testbed": (200, 75), "production": (300, 110)}


def memory_message(args: argparse.Namespace) -> str:
    """What ran out of memory, the current limit and what the command needs."""
    limit = ""
    if resource is not None:
        try:
            soft, _ = resource.getrlimit(resource.RLIMIT_AS)
            if soft != resource.RLIM_INFINITY:
                limit = f" under an address-space limit of {soft / 2**20:.0f} MB (ulimit -v)"
        except (OSError, ValueError):  # pragma: no cover
            pass
    if getattr(args, "command", None) == "train":
        # was: the episode sizes and "fewer --workers", an option train does not have
        return (
            f"out of memory{limit}. A training run keeps n_steps x n_envs steps of observations, "
            "actions and masks in its rollout buffer (DQN: buffer_size steps in its replay buffer): "
            "lower n_steps (--set n_steps=...) or --n-envs (DQN: --set buffer_size=...), raise the "
            "limit (ulimit -v unlimited), or free memory"
        )
    scen = str(getattr(args, "scenario", "") or "")
    need = MEMORY_NEEDED_MB.get(scen)
    if need:
        need_s = (f"; one '{scen}' episode needs about {need[0]} MB of address space "
                  f"({need[1]} MB resident), per worker process")
    else:
        a, r = MEMORY_NEEDED_MB["production"]
        need_s = f"; one production episode needs about {a} MB of address space ({r} MB resident)"
    fewer = ", or use fewer --workers" if hasattr(args, "workers") else ""
    return f"out of memory{limit}{need_s}. Raise the limit (ulimit -v unlimited) or free memory{fewer}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
