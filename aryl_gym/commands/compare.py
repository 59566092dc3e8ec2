"""``aryl-gym compare``: several policies on one scenario over several seeds, side by side.

Prints the SPEC 5 metrics (mean over seeds) per policy and their ratios to the first policy,
then, paired by seed, the geometric mean of the per-seed ``avg_jct`` ratios with its 95% Student-t
interval and the number of seeds (:func:`aryl_gym.stats.paired_ratio_ci`, as ``reproduce``'s
rows). ``--json`` prints one object: ``{"rows": [{"policy", "seed", <metrics>}...], "ratios":
{policy: {metric: mean(policy) / mean(first)}}, "ratio_ci": {policy: {metric: {"method", "mean",
"ci_lo", "ci_hi", "n", "dropped_seeds", "per_seed"}}}}``, the means over the seeds where both have
a value, the intervals over the seeds where both have a finite value (``ci_lo``/``ci_hi`` null
with fewer than two). A ratio below 1 on a time metric means the policy is faster than the first
one (the paper's "1.53x lower queuing time" is ``1 / ratio``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any

from aryl_gym.commands._common import add_scenario_args, fmt_num, names_list, seeds_arg, table
from aryl_gym.metrics import names as metric_names
from aryl_gym.metrics import view as metric_view

NAME = "compare"
HELP = "run several policies on one scenario and seeds; table of SPEC 5 metrics and ratios"

#: SPEC 5 metrics of the JSON rows and ratios, and the columns of the text table (both from
#: the metric table, aryl_gym.metrics.METRICS)
METRICS = list(metric_names("compare"))
TABLE = metric_view("compare-table")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_args(p)
    p.add_argument(
        "--policies",
        default="fifo,aryl",
        help="comma-separated policy names; the first is the reference",
    )
    p.add_argument(
        "--seeds", type=seeds_arg, default=[0], help="seeds like 0,1,2 or 0-4 (default 0)"
    )
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    p.add_argument("--quiet", "--no-progress", dest="quiet", action="store_true",
                   help="no progress lines on stderr")
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.commands.simulate import add_trace_args

    add_trace_args(p)


def _has(v: Any) -> bool:
    """A value to average (not None, not NaN)."""
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def _mean(vals: list[Any]) -> float:
    xs = [float(v) for v in vals if _has(v)]
    return sum(xs) / len(xs) if xs else float("nan")


def summarize(
    rows: list[dict[str, Any]], policies: list[str]
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """(means per policy and metric, ratios mean(policy) / mean(first policy)). A ratio is over
    the seeds where both policies have a value (was: each mean over its own seeds, so a value
    missing on one seed, e.g. no queuing time when no job started, compared different seeds)."""
    means: dict[str, dict[str, float]] = {}
    by_seed: dict[str, dict[str, dict[Any, Any]]] = {}
    for p in policies:
        mine = [r for r in rows if r["policy"] == p]
        means[p] = {m: _mean([r.get(m) for r in mine]) for m in METRICS}
        by_seed[p] = {m: {r["seed"]: r.get(m) for r in mine if _has(r.get(m))} for m in METRICS}
    first = policies[0]
    ratios: dict[str, dict[str, float]] = {}
    for p in policies:
        ratios[p] = {}
        for m in METRICS:
            have, ref = by_seed[p][m], by_seed[first][m]
            both = [s for s in have if s in ref]
            a, b = _mean([have[s] for s in both]), _mean([ref[s] for s in both])
            ratios[p][m] = a / b if b and math.isfinite(a) and math.isfinite(b) else float("nan")
    return means, ratios


#: the metrics whose paired intervals the text output prints (the JSON holds every metric's)
CI_METRICS = ("avg_jct",)


def ratio_cis(rows: list[dict[str, Any]], policies: list[str],
              metrics: list[str] | tuple[str, ...] = tuple(METRICS)) -> dict[str, dict[str, Any]]:
    """``{policy: {metric: RatioStat}}`` for every policy but the first: the per-seed ratios
    ``policy / first`` over the seeds where both have a finite value, their geometric mean and
    95% t interval (:func:`aryl_gym.stats.paired_ratio_ci`; a seed whose ratio is undefined, a
    zero denominator, is dropped and counted). A comparison comes with its interval and its
    number of seeds (was: a ratio of means alone, however few the seeds)."""
    # stats imports scipy only when an interval is computed
    from aryl_gym.stats import paired_ratio_ci

    def per_seed(p: str, m: str) -> dict[Any, float]:
        return {r["seed"]: float(r[m]) for r in rows if r["policy"] == p and _has(r.get(m))
                and not isinstance(r.get(m), bool) and math.isfinite(float(r[m]))}

    first = policies[0]
    out: dict[str, dict[str, Any]] = {}
    for p in policies[1:]:
        out[p] = {}
        for m in metrics:
            a, b = per_seed(p, m), per_seed(first, m)
            both = sorted(s for s in a if s in b)
            out[p][m] = paired_ratio_ci({s: (a[s] / b[s] if b[s] else math.nan) for s in both})
    return out


def ci_table(cis: dict[str, dict[str, Any]], first: str, metric: str) -> str:
    """The text block of :func:`ratio_cis` for ``metric``."""
    body = []
    for p, by in cis.items():
        st = by[metric]
        ci = (f"{st.lo:.3f} .. {st.hi:.3f}" if math.isfinite(st.lo) and math.isfinite(st.hi)
              else "- (fewer than 2 seeds)")
        mean = "-" if not math.isfinite(st.mean) else f"{st.mean:.3f}" + (
            " (arith.)" if st.method == "arithmetic" else "")
        body.append([p, mean, ci, f"{st.n}" + (f" ({st.dropped} undefined)" if st.dropped else "")])
    return (f"{metric}, paired by seed: per-seed ratio policy / {first}, geometric mean and 95% "
            f"Student-t interval\n" + table(body, ["policy", "ratio", "95% CI", "seeds"]))


def run(args: argparse.Namespace) -> int:
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.agents import make_policy
    from aryl_gym.commands.simulate import failure_note, load_episode

    policies = names_list(args.policies, "--policies")
    for p in policies:
        make_policy(p)  # unknown names fail before any run, listing the known ones
    rows: list[dict[str, Any]] = []
    failures: list[str] = []  # "POLICY seed S: why", one per failed episode
    total = len(policies) * len(args.seeds)
    i = 0
    for seed in args.seeds:
        ep = load_episode(args, seed)
        for name in policies:
            i += 1
            tic = time.perf_counter()
            res = ep.simulator().run(make_policy(name))
            d = res.to_dict()
            rows.append({"policy": name, "seed": seed, **{m: d.get(m) for m in METRICS}})
            note = failure_note(res) if res.failed else ""
            if note:
                failures.append(f"{name} seed {seed}: {note}")
            if not args.quiet:
                print(
                    f"[{i}/{total}] {res.scenario} seed {seed} {name}: avg JCT {fmt_num(res.avg_jct)} s, "
                    f"avg queue {fmt_num(res.avg_queue_time)} s, {time.perf_counter() - tic:.1f} s wall"
                    + (f"; FAILED: {note}" if note else ""),
                    file=sys.stderr,
                    flush=True,
                )
    means, ratios = summarize(rows, policies)
    if args.json:

        def clean(v):
            return None if isinstance(v, float) and not math.isfinite(v) else v

        out = {
            "scenario": args.scenario,
            "seeds": list(args.seeds),
            "rows": [{k: clean(v) for k, v in r.items()} for r in rows],
            "ratios": {p: {m: clean(v) for m, v in r.items()} for p, r in ratios.items()},
            "ratio_ci": {p: {m: st.to_dict() for m, st in by.items()}
                         for p, by in ratio_cis(rows, policies).items()},
            "failed_episodes": len(failures),
        }
        print(json.dumps(out))
        return _report_failures(failures, len(rows))
    seeds = ",".join(str(s) for s in args.seeds)
    print(f"scenario {args.scenario}, seeds {seeds}: mean over seeds (failed episodes: a count)")

    def cell(p: str, m: Any) -> Any:
        if m.fmt == "c":  # a 0/1 flag per episode: how many of the policy's episodes had it
            flags = [r.get(m.name) for r in rows if r["policy"] == p]
            return f"{sum(1 for f in flags if f)}/{len(flags)}"
        return means[p][m.name]

    print(
        table(
            [[p, *[cell(p, m) for m in TABLE]] for p in policies],
            ["policy", *[m.header for m in TABLE]],
        )
    )
    if len(policies) >= 2:  # was: an empty ratio table
        print()
        print(f"ratio to {policies[0]} (policy / {policies[0]}; < 1 on times = faster)")
        print(
            table(
                [[p, *[_ratio(ratios[p][m.name]) for m in TABLE]] for p in policies[1:]],
                ["policy", *[m.header for m in TABLE]],
            )
        )
        cis = ratio_cis(rows, policies, CI_METRICS)
        for m in CI_METRICS:
            print()
            print(ci_table(cis, policies[0], m))
    return _report_failures(failures, len(rows))


def _report_failures(failures: list[str], episodes: int) -> int:
    """Name the failed episodes on stderr: exit 1 when every episode failed (was: exit 0 with a
    table of censored figures), 0 with a warning when only some did."""
    if not failures:
        return 0
    listed = "; ".join(failures[:5]) + (f"; and {len(failures) - 5} more" if len(failures) > 5 else "")
    if len(failures) == episodes:
        print(f"aryl-gym compare: error: every episode failed ({episodes} of {episodes}: jobs left "
              f"unfinished): {listed}", file=sys.stderr)
        return 1
    print(f"aryl-gym compare: warning: {len(failures)} of {episodes} episodes failed (jobs left "
          f"unfinished; their job-time figures count those jobs censored at the episode's end): {listed}",
          file=sys.stderr)
    return 0


def _ratio(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v:.3f}"
