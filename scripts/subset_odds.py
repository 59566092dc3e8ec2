"""How likely a smaller evaluation is to show what a large one shows: the odds that a random
n-seed subset of held-out results meets a bar.

    python scripts/subset_odds.py set1.json set2.json --agent ppo-v1 --vs aryl --load 1.3 --n 10,20,40

Reads the JSON files of ``scripts/eval_v1.py --json`` (per-seed avg JCT per entry and load), pools
the seeds of every file at ``--load`` (an entry's label may differ between files: ``--agent``
takes ``LABEL`` or ``FILE_INDEX:LABEL`` overrides, e.g. ``--agent ppo-v1 --agent 0:best``), and for
each n draws ``--draws`` subsets of n distinct seeds. For each subset it computes the ratio of
mean avg JCTs (agent / reference) and its paired bootstrap 95% interval
(``aryl_gym.stats.paired_bootstrap_ratio``, as eval_v1.py),
and counts how often the point is at most ``--point`` (0.97) and how often the interval's upper
end is below ``--upper`` (1.0). A bar met on the pooled seeds but with odds well below 1 at the
n a reader would use says how much a single small evaluation can mislead.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np

from aryl_gym.fileio import parse_number
from aryl_gym.stats import paired_bootstrap_ratio


def pooled(paths: list[str], labels: dict[int | None, str], vs: str, load: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-seed avg JCT of the agent and of ``vs`` at ``load`` over every file (seeds in file
    order). A file without that load contributes nothing; a file with it but without the
    agent's label or ``vs`` is a ValueError naming the labels it has."""
    xs: list[float] = []
    ys: list[float] = []
    seen: dict[str, str] = {}  # content digest -> the file that gave it
    for i, path in enumerate(paths):
        try:
            raw = Path(path).read_bytes()
            runs = json.loads(raw)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a readable eval_v1.py --json file ({exc})") from None
        digest = hashlib.sha256(raw).hexdigest()
        if digest in seen:  # the same seeds would be pooled twice
            raise ValueError(f"{path}: the same results as {seen[digest]} (given twice?); each file may "
                             "be pooled once")
        seen[digest] = path
        if not isinstance(runs, list):
            raise ValueError(f"{path}: expected a list of loads (eval_v1.py --json), got {type(runs).__name__}")
        label = labels.get(i, labels.get(None))
        for r in runs:
            if not isinstance(r, dict) or not isinstance(r.get("avg_jct"), dict) or "load" not in r:
                raise ValueError(f"{path}: an entry without load/avg_jct; is it an eval_v1.py --json file?")
            if isinstance(r["load"], bool) or not isinstance(r["load"], (int, float)):
                raise ValueError(f"{path}: load {r['load']!r} is not a number")
            if abs(float(r["load"]) - load) > 1e-9:
                continue
            have = sorted(r["avg_jct"])
            for name in (label, vs):
                if name not in r["avg_jct"]:
                    raise ValueError(f"{path} (load {load}): no entry {name!r}; it has {', '.join(have)} "
                                     f"(use --agent {i}:LABEL for this file)")
            x, y = (_jcts(r["avg_jct"][n], f"{path} (load {load}) {n!r}") for n in (label, vs))
            if len(x) != len(y):
                raise ValueError(f"{path}: {label!r} and {vs!r} have different seed counts")
            xs.extend(map(float, x))
            ys.extend(map(float, y))
    return np.array(xs), np.array(ys)


def _jcts(values: object, where: str) -> list[float]:
    """Per-seed avg JCTs: a list of finite numbers > 0 (a NaN, zero or negative JCT, or a seed
    whose value is missing, would bias the pooled ratio silently)."""
    if not isinstance(values, list):
        raise ValueError(f"{where}: expected a list of per-seed avg JCTs, got {values!r}")
    for k, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{where}: seed #{k} has avg JCT {v!r}; every value must be a finite "
                             "number > 0 (an episode that finished no job has none: drop that file or entry)")
    return [float(v) for v in values]


def subset_odds(x: np.ndarray, y: np.ndarray, n: int, draws: int = 2000, reps: int = 2000,
                point: float = 0.97, upper: float = 1.0, seed: int = 0) -> tuple[float, float]:
    """(share of n-seed subsets whose ratio of means is <= ``point``, share whose paired
    bootstrap 95% upper end is < ``upper``; a one-seed subset has no interval and never meets
    that bar). Subsets are drawn without replacement."""
    if not 1 <= n <= len(x):
        raise ValueError(f"n={n} must be between 1 and the {len(x)} pooled seeds")
    rng = np.random.default_rng(seed)
    ok_point = ok_upper = 0
    for k in range(draws):
        i = rng.choice(len(x), n, replace=False)
        ratio, _, hi = paired_bootstrap_ratio(x[i], y[i], reps=reps, rng=seed + 1 + k)
        ok_point += ratio <= point
        ok_upper += hi < upper
    return ok_point / draws, ok_upper / draws


def _number(text: str) -> float:
    """A finite number (``0.97``, ``9.7e-1``): NaN used to match every load and every bar."""
    try:
        return float(parse_number(text, "value"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("value: ")) from None


def _whole(text: str) -> int:
    """A whole number (``2000``, ``2e3``)."""
    try:
        return int(parse_number(text, "value", integer=True))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("value: ")) from None


def _labels(items: list[str]) -> dict[int | None, str]:
    out: dict[int | None, str] = {}
    for it in items:
        head, sep, tail = it.partition(":")
        if sep and head.isdigit():
            out[int(head)] = tail
        else:
            out[None] = it
    if None not in out:
        raise argparse.ArgumentTypeError("--agent: give one plain LABEL (the default for every file)")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", help="JSON files of scripts/eval_v1.py --json")
    p.add_argument("--agent", action="append", required=True, help="LABEL, or FILE_INDEX:LABEL for one file")
    p.add_argument("--vs", default="aryl")
    p.add_argument("--load", type=_number, required=True)
    p.add_argument("--n", default="10,20,40", help="subset sizes, comma-separated")
    p.add_argument("--draws", type=_whole, default=2000)
    p.add_argument("--point", type=_number, default=0.97)
    p.add_argument("--upper", type=_number, default=1.0)
    a = p.parse_args(argv)
    try:
        labels = _labels(a.agent)
        sizes = [_whole(s) for s in a.n.split(",") if s.strip()]
    except (argparse.ArgumentTypeError, ValueError) as exc:
        p.error(f"--n {a.n!r}: {exc}" if "--agent" not in str(exc) else str(exc))
    if not sizes:  # was: an empty table, exit 0
        p.error(f"--n {a.n!r}: give at least one subset size, e.g. 10,20,40")
    dup = sorted({n for n in sizes if sizes.count(n) > 1})
    if dup:  # was: the same row printed twice
        p.error(f"--n: {dup[0]} is given twice; give each size once")
    if min(sizes) < 1:
        p.error(f"--n: subset sizes must be >= 1, got {min(sizes)}")
    if a.draws < 1:
        p.error("--draws must be >= 1")
    try:
        x, y = pooled(a.files, labels, a.vs, a.load)
        if not len(x):
            raise ValueError(f"no file has load {a.load}")
        print(f"{len(x)} pooled seeds at load {a.load}: {labels[None]} / {a.vs} = {x.mean() / y.mean():.3f} "
              f"({int((x > y).sum())} seeds above 1, the largest {float((x / y).max()):.3f})")
        if max(sizes) > len(x):  # before the table, not after some of its rows
            raise ValueError(f"n={max(sizes)} must be between 1 and the {len(x)} pooled seeds")
        print(f"| n | P(ratio <= {a.point}) | P(95% upper end < {a.upper}) |\n|---|---|---|")
        for n in sizes:
            pp, pu = subset_odds(x, y, n, a.draws, point=a.point, upper=a.upper)
            # one seed has no spread: its bootstrap interval has zero width (was: counted as met)
            print(f"| {n} | {pp:.3f} | {'n/a (one seed has no interval)' if n < 2 else f'{pu:.3f}'} |")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
