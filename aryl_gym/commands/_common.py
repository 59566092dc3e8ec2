"""Argument helpers shared by subcommands."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from aryl_gym.fileio import parse_number

#: the most seeds one ``--seeds`` may name (a range beyond this is almost surely a typo)
MAX_SEEDS = 100_000
#: seeds are the simulator's numpy seeds: non-negative, below 2**63
MAX_SEED = 2**63 - 1
#: the scenario every command uses when ``--scenario`` is not given
DEFAULT_SCENARIO = "testbed"


def seeds_arg(text: str) -> list[int]:
    """Parse ``0,1,2`` or ``0-4`` into a list of distinct non-negative seeds (at most MAX_SEEDS)."""
    out: list[int] = []
    parts = [part.strip() for part in text.split(",")]
    if any(parts) and not all(parts):
        # was: skipped, so '1,,2' ran seeds 1 and 2 (a typo of '1,2' or of '1,12') without a word
        raise argparse.ArgumentTypeError(
            f"seeds {text!r} have an empty item (two commas in a row, or a comma at an end); "
            "write them like '0,1,2' or '0-4'"
        )
    try:
        for part in parts:
            if not part:
                continue
            if "-" in part[1:]:
                a, b = (_whole(x) for x in part.split("-", 1))
                if b < a:
                    raise argparse.ArgumentTypeError(f"seed range {part!r} is empty (end < start); write START-END")
                if b - a + 1 + len(out) > MAX_SEEDS:
                    raise argparse.ArgumentTypeError(
                        f"seed range {part!r} has {b - a + 1:,} seeds; at most {MAX_SEEDS:,} per run "
                        "(check the range)"
                    )
                out.extend(range(a, b + 1))
            else:
                out.append(_whole(part))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"seeds must be integers like '0,1,2' or '0-4', got {text!r}"
        ) from None
    if not out:
        raise argparse.ArgumentTypeError("give at least one seed, e.g. 0,1,2 or 0-4")
    neg = [s for s in out if s < 0 or s > MAX_SEED]
    if neg:
        raise argparse.ArgumentTypeError(f"seeds must be in [0, 2**63), got {neg[0]}")
    dup = sorted({s for s in out if out.count(s) > 1}) if len(out) < 5000 else _dups(out)
    if dup:
        raise argparse.ArgumentTypeError(
            f"seed {dup[0]} is given twice in {text!r}; each seed may appear once"
        )
    return out


def _whole(text: str) -> int:
    """An integer as the one number parser reads it (``1000`` or ``1e3``); ValueError otherwise."""
    return int(parse_number(text, integer=True))


def _dups(xs: list[int]) -> list[int]:
    seen: set[int] = set()
    out = []
    for x in xs:
        if x in seen:
            out.append(x)
        seen.add(x)
    return sorted(set(out))


def seed_arg(text: str) -> int:
    """A single seed: an integer in [0, 2**63) (``1000`` or ``1e3``)."""
    try:
        v = _whole(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}") from None
    if not 0 <= v <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**63), got {v}")
    return v


def check_seed_range(first: int, count: int, flag: str, count_what: str = "seeds") -> None:
    """Every seed of ``first .. first + count - 1`` is a seed :func:`seed_arg` accepts (at most
    ``MAX_SEED``); a ValueError naming ``flag`` otherwise (was: seeds up to 2**63 + count ran)."""
    last = first + count - 1
    if last > MAX_SEED:
        raise ValueError(
            f"{flag} {first} with {count:,} {count_what} uses seeds up to {last}, above the largest seed "
            f"2**63 - 1 = {MAX_SEED}; give {flag} at most {MAX_SEED - count + 1} (or fewer {count_what})"
        )


def int_arg(text: str) -> int:
    """Any integer (``200`` or ``2e2``); the command checks its range."""
    try:
        return _whole(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None


def float_arg(text: str) -> float:
    """A finite number (``0.5``, ``5e-1``); the command checks its range (was: ``type=float``,
    which also took ``nan``, ``inf`` and any script's digits)."""
    try:
        return float(parse_number(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a finite number (e.g. 0.5), got {text!r}") from None


def out_arg(text: str) -> str:
    """An output path: not empty (``--out ''`` used to mean the current folder, or the default)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give a folder or file path")
    return text


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        v = int(parse_number(text, integer=True))  # 1e5 and 100000 alike
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {v}")
    return v


def nonneg_int(text: str) -> int:
    """An integer >= 0."""
    try:
        v = int(parse_number(text, integer=True))  # 1e5 and 100000 alike
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {v}")
    return v


def names_list(text: str, flag: str, example: str = "fifo,aryl") -> list[str]:
    """``a,b,c`` -> names; empty or repeated names are a ValueError naming ``flag``."""
    parts = [p.strip() for p in text.split(",")]
    names = [p for p in parts if p]
    if not names:
        raise ValueError(f"{flag}: give at least one name, e.g. {example}")
    if len(names) != len(parts):  # was: skipped, so 'fifo,,aryl' (a name left out?) ran as given
        raise ValueError(f"{flag} {text!r}: an empty name (two commas in a row, or a comma at an end); "
                         f"write the names like {example}")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"{flag}: {dup[0]!r} is given twice; each name may appear once")
    return names


def add_json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")


def data_root_arg(text: str) -> str:
    """A ``--data-root`` folder: not empty (``''`` used to read as not given, so the traces were
    looked up in $ARYL_GYM_DATA or the default without a word)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give the folder holding traces/, or leave the option out")
    return text


def add_data_root_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-root", type=data_root_arg, default=None,
                   help="folder holding traces/ (or $ARYL_GYM_DATA)")


def add_scenario_args(p: argparse.ArgumentParser, default: str = DEFAULT_SCENARIO) -> None:
    p.add_argument("--scenario", default=default, help=f"scenario name or YAML path (default {default})")
    add_data_root_arg(p)


def fmt_num(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if abs(v) >= 100:
            return f"{v:,.0f}"
        return f"{v:.3g}"
    return str(v)


def table(rows: Iterable[list[Any]], header: list[str]) -> str:
    rows = [[fmt_num(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    sep = "  ".join("-" * w for w in widths)
    body = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        for r in rows
    ]
    return "\n".join([line, sep, *body])


def null_nonfinite(v: Any) -> Any:
    """``v`` with every NaN or infinite float (nested in dicts, lists, tuples) as None."""
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: null_nonfinite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [null_nonfinite(x) for x in v]
    return v


def strict_json(obj: Any, indent: int | None = None) -> str:
    """Strict JSON: a figure that is not a finite number (no paper value, no finished job) is
    null, as ``simulate --json`` and ``compare --json`` write it (a bare NaN or Infinity is
    not JSON: strict parsers refuse it)."""
    return json.dumps(null_nonfinite(obj), allow_nan=False, default=float, indent=indent)
