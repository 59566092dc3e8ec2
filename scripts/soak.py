#!/usr/bin/env python3
"""Kill-and-resume soak (issue 34): each command killed (SIGKILL) at random points, resumed,
then compared with an uninterrupted run of the same work.

    python scripts/soak.py --kills 50 --what leaderboard,reproduce,train --work /tmp/soak

* ``leaderboard``: a small suite on ``tiny`` (6 policies x 8 seeds), each attempt
  ``leaderboard --resume``; the final ``results.csv`` against the reference run's: rows lost,
  duplicated, damaged, and wrong (any metric but the wall-clock ones differs).
* ``reproduce``: ``reproduce --scale tiny --seeds 3`` on a few rows, each attempt a rerun on the
  same ``--out``; every cached episode against the reference cache (lost, damaged, wrong).
* ``train``: a tiny MaskablePPO run (1,024 steps, a checkpoint every 64), each attempt
  ``train --resume`` of the latest good checkpoint; checkpoints whose bytes changed after they
  were written (overwritten later state), extra run folders, saves cut by a kill, and whether
  each round reaches its total.

Each command runs in rounds from an empty folder until ``--kills`` kills have landed (an attempt
that finishes unkilled ends a round, which is then checked).

Prints one line per command with the figures summed over the rounds (the target is 0 lost,
duplicated, damaged, wrong, overwritten). Kills land uniformly in [0.2 s, the reference run's
wall time].
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARYL = [sys.executable, "-m", "aryl_gym.cli"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}

SUITE = """name: soak
description: kill-and-resume soak
scenarios: [tiny]
seeds: "0-7"
baseline: fifo
policies: [fifo, sjf, aryl, afs, gandiva, random]
"""
ROWS = "queue-aryl-baseline,jct-aryl-baseline,afs-aryl-avg"


def run(argv: list[str], timeout: float | None = None) -> tuple[int, float]:
    """Run to completion; (return code, wall seconds)."""
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=ENV, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, timeout=timeout, check=False)
    if p.returncode not in (0, 1):
        sys.stderr.write(p.stderr[-2000:])
    return p.returncode, time.perf_counter() - t0


def killed(argv: list[str], after: float) -> bool:
    """Start ``argv``, SIGKILL it (and its workers) after ``after`` s; True if it was killed."""
    p = subprocess.Popen(argv, env=ENV, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        p.wait(timeout=after)
        return False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return True


def rounds(attempt: list[str], out: Path, kills: int, span: float, rng: random.Random,
           on_round: Callable[[Path], dict[str, int]]) -> tuple[int, int, dict[str, int]]:
    """Kill ``attempt`` (whose --out is ``out``) at random points until ``kills`` kills landed;
    whenever an attempt finishes unkilled the round ends: ``on_round(out)`` counts what is wrong,
    and the next round starts from an empty ``out``. Returns (kills, rounds, summed counts)."""
    n = r = 0
    total: dict[str, int] = {}
    while n < kills and r < 10 * kills:
        if killed(attempt, rng.uniform(0.2, span)):
            n += 1
            continue
        r += 1
        for k, v in on_round(out).items():
            total[k] = total.get(k, 0) + v
        shutil.rmtree(out)
    rc, _ = run(attempt)  # the last round, to its end
    if rc in (0, 1):
        r += 1
        for k, v in on_round(out).items():
            total[k] = total.get(k, 0) + v
    else:
        total["failed to finish"] = total.get("failed to finish", 0) + 1
    return n, r, total


def _fmt(total: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in total.items())


# ----------------------------------------------------------------------------------------------
def leaderboard(work: Path, kills: int, rng: random.Random) -> str:
    from aryl_gym.leaderboard.results import VOLATILE_COLUMNS, scan_rows

    suite = work / "soak.yaml"
    suite.write_text(SUITE)
    base = [*ARYL, "leaderboard", "--suite", str(suite), "--no-plots", "--no-tensorboard", "--no-progress",
            "--workers", "1"]
    ref, soaked = work / "lb-ref", work / "lb-soak"
    _, wall = run([*base, "--out", str(ref)])
    a = scan_rows(ref / "results.csv")
    key = ("scenario", "seed", "policy")
    ra = {tuple(r[k] for k in key): r for r in a.rows}
    skip = {*VOLATILE_COLUMNS, "commit", "aryl_gym_version"}

    def compare(out: Path) -> dict[str, int]:
        b = scan_rows(out / "results.csv")
        rb = {tuple(r[k] for k in key): r for r in b.rows}
        wrong = sum(1 for k, r in ra.items() if k in rb and any(
            r[c] != rb[k][c] and not (r[c] != r[c] and rb[k][c] != rb[k][c]) for c in r if c not in skip))
        return {"rows": len(rb), "lost": len(set(ra) - set(rb)), "extra": len(set(rb) - set(ra)),
                "duplicated": len(b.duplicated), "damaged": len(b.damaged), "edited": len(b.edited or []),
                "wrong": wrong}

    n, r, total = rounds([*base, "--out", str(soaked), "--resume"], soaked, kills, wall, rng, compare)
    return f"leaderboard: {n} kills over {r} rounds of {len(ra)} rows (reference {wall:.1f} s): {_fmt(total)}"


def reproduce(work: Path, kills: int, rng: random.Random) -> str:
    from aryl_gym.reproduce import CacheError, read_cached

    base = [*ARYL, "reproduce", "--scale", "tiny", "--seeds", "3", "--rows", ROWS, "--no-progress"]
    ref, soaked = work / "rp-ref", work / "rp-soak"
    _, wall = run([*base, "--out", str(ref)])
    files = sorted(p.relative_to(ref) for p in (ref / "episodes").rglob("*.json"))
    volatile = {"episode_wall_s", "episode_cpu_s", "wall_s", "decision_ms_mean", "decision_ms_max"}

    def compare(out: Path) -> dict[str, int]:
        lost = damaged = wrong = 0
        for f in files:
            try:
                d = read_cached(out / f)
            except CacheError:
                damaged += 1
                continue
            if d is None:
                lost += 1
                continue
            r0 = json.loads((ref / f).read_text())["result"]
            wrong += any(v != d["result"].get(k) for k, v in r0.items() if k not in volatile)
        extra = len(list((out / "episodes").rglob("*.json"))) - len(files) + lost
        return {"episodes": len(files) - lost, "lost": lost, "damaged": damaged, "wrong": wrong, "extra": extra}

    n, r, total = rounds([*base, "--out", str(soaked)], soaked, kills, wall, rng, compare)
    return f"reproduce: {n} kills over {r} rounds of {len(files)} episodes (reference {wall:.1f} s): {_fmt(total)}"


def train(work: Path, kills: int, rng: random.Random) -> str:
    import zipfile

    from aryl_gym.train.runner import saved_steps

    total = 1024
    base = [*ARYL, "train", "--config", "maskable_ppo", "--scenario", "tiny", "--timesteps", str(total),
            "--set", "n_steps=64", "--set", "batch_size=32", "--eval-freq", "0", "--n-envs", "1",
            "--checkpoint-freq", "64", "--quiet"]
    _, wall = run([*base, "--out", str(work / "tr-ref")])
    out = work / "tr"
    counts = {"rounds": 0, "reached": 0, "forked run folders": 0, "checkpoints overwritten": 0,
              "saves cut by a kill": 0, "resume refused": 0}
    n = 0
    seen: dict[Path, str] = {}

    def latest() -> Path | None:
        good = [(saved_steps(c) or -1, c) for c in out.glob("*/checkpoints/*.zip") if zipfile.is_zipfile(c)]
        return max(good)[1] if good else None

    def done() -> bool:
        ck = latest()
        return any((r / "model.zip").exists() for r in out.glob("*/")) or (
            ck is not None and (saved_steps(ck) or 0) >= total)

    def end_round() -> None:
        counts["rounds"] += 1
        counts["reached"] += done()
        # a run killed before its first checkpoint is started again (nothing to resume): only
        # folders holding checkpoints count; more than one would mean a resume forked the run
        with_ck = [p for p in out.iterdir() if p.is_dir() and any((p / "checkpoints").glob("*.zip"))]
        counts["forked run folders"] += max(len(with_ck) - 1, 0)
        shutil.rmtree(out)
        seen.clear()

    attempts = 0
    while n < kills and attempts < 10 * kills:
        attempts += 1
        ck = latest()
        argv = [*base, "--out", str(out)] if ck is None else [*base, "--resume", str(ck)]
        if killed(argv, rng.uniform(0.2, wall)):
            n += 1
        elif ck is not None and not done():
            rc, _ = run(argv)  # finished unkilled? (a refused resume returns at once)
            counts["resume refused"] += rc == 2
        for c in out.glob("*/checkpoints/*.zip"):
            if not zipfile.is_zipfile(c):  # a save cut by the kill: the next run redoes it
                counts["saves cut by a kill"] += 1
                c.unlink()
                continue
            h = hashlib.sha256(c.read_bytes()).hexdigest()
            counts["checkpoints overwritten"] += c in seen and seen[c] != h
            seen[c] = h
        if out.exists() and done():
            end_round()
    if out.exists():
        ck = latest()
        if not done():
            run([*base, "--out", str(out)] if ck is None else [*base, "--resume", str(ck)])
        end_round()
    return f"train: {n} kills over {counts['rounds']} rounds (reference {wall:.1f} s): {_fmt(counts)}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=50)
    p.add_argument("--what", default="leaderboard,reproduce,train")
    p.add_argument("--work", default="/tmp/aryl-soak")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    work = Path(a.work)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    rng = random.Random(a.seed)
    for what in a.what.split(","):
        print({"leaderboard": leaderboard, "reproduce": reproduce, "train": train}[what](work, a.kills, rng),
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
