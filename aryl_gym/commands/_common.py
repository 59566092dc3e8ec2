"""Argument helpers shared by subcommands."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable
from typing import Any


def seeds_arg(text: str) -> list[int]:
    """Parse ``0,1,2`` or ``0-4`` into a list of seeds."""
    out: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            if "-" in part[1:]:
                a, b = part.split("-", 1)
                out.extend(range(int(a), int(b) + 1))
            else:
                out.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"seeds must be integers like '0,1,2' or '0-4', got {text!r}"
        ) from None
    if not out:
        raise argparse.ArgumentTypeError("give at least one seed")
    return out


def add_scenario_args(p: argparse.ArgumentParser, default: str = "testbed") -> None:
    p.add_argument("--scenario", default=default, help=f"scenario name or YAML path (default {default})")
    p.add_argument("--data-root", default=None, help="folder holding traces/ (or $ARYL_GYM_DATA)")


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
