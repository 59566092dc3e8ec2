#!/usr/bin/env python3
"""Behaviour check for refactors: are episodes bit-identical before and after a change?

``record`` runs a fixed set of episodes and writes one SHA-256 digest per episode (and the
summary figures, for reading) to a JSON file; ``compare`` runs them again and reports every
episode whose digest differs. Run ``record`` on the commit before a refactor and ``compare``
after it::

    git stash; python scripts/check_equality.py record --out /tmp/before.json; git stash pop
    python scripts/check_equality.py compare /tmp/before.json

The set: every registered policy on ``tiny`` and ``testbed`` with seeds 0 and 1, ``aryl`` on
``basic`` seed 0, and both Gymnasium envs on ``testbed`` (each action mode of ``Aryl-v1``, and
``ArylReclaim-v1``) driven by seeded random masked actions, whose digest covers every
observation, reward, flag and the final ``EpisodeResult``.

``--quick`` drops ``basic`` and the slow Pollux policies on ``testbed`` (about a minute).
``--world v1`` plays the native episodes on World v1's scenarios (aryl_gym.world_versions), so a
record made before World v2 still compares; the envs keep their ids' worlds.
``--size`` adds env episodes at the paper's size (``basic`` and ``production``: ``sequential``
with window 32 and observation v1, with and without ``window_order="pred_time"`` and
preemption, ``targets``; a few thousand seeded random masked steps each, masks and infos in the
digest) and ``aryl`` on ``production`` (about two minutes more); record and compare with the
same flags.
``--ignore F1,F2`` (record) leaves those ``EpisodeResult`` fields out of every digest, for a
change that means to move a figure's definition but no episode (a metrics fix: record at the
commit before with this script, ``--ignore combined_usage,combined_usage_hourly``); the record
keeps the list and ``compare`` applies it.
The digest covers every field of ``EpisodeResult`` except the timings (``wall_s``, ``decision_ms_mean``, ``decision_ms_max``) and fields added later
while they hold their old implied value (``thrashing`` False, ``failed`` 0, ``avg_jct_finished``
equal to ``avg_jct``).
Exit code 0 when all digests match, 1 when any differs, 2 on bad input.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

SLOW = {"pollux", "pollux-250", "aryl-optimal-reclaim"}
SUMMARY = ("avg_jct", "avg_queue_time", "jobs_completed", "preemptions")
# timings, not behaviour
TIMING = ("wall_s", "decision_ms_mean", "decision_ms_max")
# fields added later, left out while they hold the value every earlier episode had, so records
# made before they existed still compare
ADDED = {"thrashing": False, "failed": 0, "declared_rate_jobs": 0}
#: World v2 figures computed from per-job arrays the old digests never held; left out of the
#: digest (the episode's behaviour is covered by jcts, queue_times and the other figures)
NEW_FIGURES = ("avg_queue_time_total", "p95_queue_time_total", "avg_run_time")
#: EpisodeResult fields left out of every digest of this run (``--ignore``): figures whose
#: definition a change means to move, so the episodes' behaviour can still be compared
IGNORE: tuple[str, ...] = ()


def _result_digest(res: Any) -> tuple[str, dict[str, Any]]:
    d = res.to_dict(series=True)
    for k in TIMING + NEW_FIGURES + IGNORE:
        d.pop(k, None)
    for k, v in ADDED.items():
        if d.get(k) == v:
            d.pop(k)
    # avg_jct_finished (and its predecessor avg_jct_censored) says nothing new while it equals
    # avg_jct (every job finished); a record of an episode with unfinished jobs made before the
    # metrics' version 2 differs: its JCT figures counted the finished jobs only
    for k in ("avg_jct_finished", "avg_jct_censored"):
        if k in d and d[k] == d.get("avg_jct"):
            d.pop(k)
    blob = json.dumps(d, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest(), {k: d.get(k) for k in SUMMARY}


def _policy_cases(quick: bool) -> list[tuple[str, str, int]]:
    from aryl_gym.agents import policy_names

    cases = []
    for scen in ("tiny", "testbed"):
        for pol in policy_names():
            if quick and scen == "testbed" and pol in SLOW:
                continue
            for seed in (0, 1):
                cases.append((scen, pol, seed))
    if not quick:
        cases.append(("basic", "aryl", 0))
    return cases


WORLD = "v2"


def _run_policy(scen: str, pol: str, seed: int) -> tuple[str, dict[str, Any]]:
    from aryl_gym.agents import make_policy

    from aryl_gym.scenario import load_scenario, make_episode
    from aryl_gym.world_versions import in_world

    ep = make_episode(in_world(load_scenario(scen), WORLD), seed)
    res = ep.simulator().run(make_policy(pol), progress=False)
    return _result_digest(res)


def _run_env(env_id: str, mode: str | None, seed: int, max_steps: int = 3000,
             extra: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    import gymnasium as gym

    import aryl_gym  # noqa: F401  (registers the envs)
    from aryl_gym.rollout import ActAgent, play

    kw: dict[str, Any] = {"scenario": "testbed", **(extra or {})}
    if mode is not None:
        kw["action_mode"] = mode
    size = extra is not None
    env = gym.make(env_id, **kw).unwrapped
    h = hashlib.sha256()
    rng = np.random.default_rng(seed)
    space = env.action_space

    def act(obs: Any, mask: np.ndarray) -> Any:
        if hasattr(space, "nvec"):
            # a MultiDiscrete mask is the concatenation of per-dimension masks
            action, off = [], 0
            for n in np.asarray(space.nvec).ravel():
                m = mask[off : off + int(n)]
                ok = np.flatnonzero(m) if m.any() else np.arange(int(n))
                action.append(int(rng.choice(ok)))
                off += int(n)
            return np.asarray(action, dtype=np.int64).reshape(np.asarray(space.nvec).shape)
        ok = np.flatnonzero(mask)
        return int(rng.choice(ok)) if ok.size else 0

    def digest(st: Any) -> None:
        if size:
            h.update(st.mask.tobytes())
        obs, info = st.next_obs, st.info
        for v in (obs.values() if isinstance(obs, dict) else [obs]):
            h.update(np.ascontiguousarray(v).tobytes())
        if size:
            h.update(repr([(k, info[k]) for k in ("time", "invalid", "queued", "running", "done") if k in info]).encode())
            h.update(np.asarray(info["window"]).tobytes())
        h.update(np.float64(st.reward).tobytes())
        h.update(bytes([st.terminated, st.truncated]))

    # the rollout loop (aryl_gym.rollout.play) with seeded random masked actions
    steps = play(ActAgent(env, act, masks=True), env, seed=seed, max_steps=max_steps, on_step=digest).steps
    res = env.episode_result() if hasattr(env, "episode_result") else None
    summary: dict[str, Any] = {"steps": steps}
    if res is not None:
        rd, rs = _result_digest(res)
        h.update(rd.encode())
        summary.update(rs)
    return h.hexdigest(), summary


def _env_cases() -> list[tuple[str, str | None, int]]:
    from aryl_gym.envs.actions import MODES

    cases: list[tuple[str, str | None, int]] = [("aryl_gym/Aryl-v1", m, s) for m in MODES for s in (0, 1)]
    cases += [("aryl_gym/ArylReclaim-v1", None, s) for s in (0, 1)]
    return cases


#: ``--size``: (label, action mode, seed, steps, env arguments)
_SEQ32 = {"window": 32, "observation": "v1"}
_PRED = {**_SEQ32, "window_order": "pred_time", "allow_preempt": True}
SIZE_CASES: tuple[tuple[str, str, int, int, dict[str, Any]], ...] = (
    ("basic", "sequential", 3, 4000, {"scenario": "basic", **_SEQ32}),
    ("basic pred_time preempt damping", "sequential", 4, 4000,
     {"scenario": "basic", **_PRED, "flap_damping": {"engage_share": 0.0}}),
    ("basic backfill", "sequential", 5, 2500, {"scenario": "basic", "window": 16, "backfill": True, "allow_preempt": True}),
    ("basic targets", "targets", 6, 1500, {"scenario": "basic", **_SEQ32}),
    ("production", "sequential", 7, 4000, {"scenario": "production", **_SEQ32}),
    ("production pred_time preempt", "sequential", 8, 4000, {"scenario": "production", **_PRED}),
    ("production targets", "targets", 9, 1000, {"scenario": "production", "window": 32}),
)


def run_all(quick: bool, size: bool = False) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    cases = _policy_cases(quick) + ([("production", "aryl", 0)] if size else [])
    for scen, pol, seed in cases:
        t = time.perf_counter()
        digest, summary = _run_policy(scen, pol, seed)
        out[f"policy {scen} {pol} seed={seed}"] = {"digest": digest, **summary}
        print(f"  {scen:8s} {pol:22s} seed {seed}  {time.perf_counter() - t:6.1f} s", file=sys.stderr)
    for env_id, mode, seed in _env_cases():
        t = time.perf_counter()
        digest, summary = _run_env(env_id, mode, seed)
        out[f"env {env_id} {mode or '-'} seed={seed}"] = {"digest": digest, **summary}
        print(f"  {env_id} {mode or ''} seed {seed}  {time.perf_counter() - t:6.1f} s", file=sys.stderr)
    if size:
        for label, mode, seed, steps, kw in SIZE_CASES:
            t = time.perf_counter()
            digest, summary = _run_env("aryl_gym/Aryl-v1", mode, seed, steps, kw)
            out[f"size {label} seed={seed}"] = {"digest": digest, **summary}
            print(f"  size {label} seed {seed}  {time.perf_counter() - t:6.1f} s", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="run the episodes and write their digests")
    r.add_argument("--out", required=True, type=Path)
    r.add_argument("--quick", action="store_true")
    r.add_argument("--size", action="store_true", help="also env episodes at basic and production size")
    r.add_argument("--ignore", default="", metavar="F1,F2",
                   help="EpisodeResult fields left out of the digests (kept in the record for compare)")
    c = sub.add_parser("compare", help="run the episodes and compare with a recorded file")
    c.add_argument("reference", type=Path)
    c.add_argument("--quick", action="store_true")
    for q in (r, c):
        q.add_argument("--world", choices=("v1", "v2"), default="v2",
                       help="the world of the native episodes (default v2)")
    c.add_argument("--size", action="store_true", help="also env episodes at basic and production size")
    args = p.parse_args(argv)
    global WORLD
    WORLD = args.world

    global IGNORE
    if args.cmd == "record":
        from aryl_gym.metrics import EpisodeResult

        fields = set(EpisodeResult.__dataclass_fields__)
        IGNORE = tuple(f for f in (x.strip() for x in args.ignore.split(",")) if f)
        unknown = [f for f in IGNORE if f not in fields]
        if unknown:
            print(f"error: --ignore {','.join(unknown)}: not EpisodeResult fields", file=sys.stderr)
            return 2
        out = run_all(args.quick, args.size)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"quick": args.quick, "ignore": list(IGNORE), "episodes": out},
                                       indent=1, sort_keys=True))
        print(f"recorded {len(out)} episodes to {args.out}")
        return 0

    try:
        record = json.loads(args.reference.read_text())
        ref = record["episodes"]
        IGNORE = tuple(record.get("ignore", ()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: cannot read reference {args.reference}: {exc}", file=sys.stderr)
        return 2
    if IGNORE:
        print(f"left out of the digests, as recorded: {', '.join(IGNORE)}", file=sys.stderr)
    now = run_all(args.quick, args.size)
    same = [k for k in now if k in ref and ref[k]["digest"] == now[k]["digest"]]
    diff = [k for k in now if k in ref and ref[k]["digest"] != now[k]["digest"]]
    missing = sorted(set(ref) - set(now))
    new = sorted(set(now) - set(ref))
    print(f"{len(same)} identical, {len(diff)} different, {len(missing)} only in reference, {len(new)} only now")
    for k in diff:
        print(f"  DIFFERENT {k}: before {ref[k]}  after {now[k]}")
    for k in missing:
        print(f"  only in reference: {k}")
    for k in new:
        print(f"  only now: {k}")
    return 0 if not diff and not missing else 1


if __name__ == "__main__":
    sys.exit(main())
