"""``aryl-gym evaluate``: a learned agent (or a reference policy) on fixed seeds, as JSON.

``--agent`` takes a shipped agent name (``ppo-testbed``), a model ``.zip`` or a run folder (the
agent acts through the env with action masks), or a reference policy name (run natively). The
``--against`` policies run natively on the same seeds. The output is the same JSON as
``aryl-gym compare``: ``{"scenario", "seeds", "rows": [{"policy", "seed", <metrics>}...],
"ratios": {policy: {metric: mean(policy) / mean(baseline)}}, "ratio_ci": {policy: {metric:
{"method", "mean", "ci_lo", "ci_hi", "n", ...}}}}`` with ``--baseline`` (default fifo) first, as
compare puts its first policy; ``ratio_ci`` pairs the seeds (geometric mean of the per-seed
ratios, 95% Student-t interval: :func:`aryl_gym.commands.compare.ratio_cis`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import gymnasium as gym

from aryl_gym.commands._common import add_data_root_arg, names_list, seeds_arg
from aryl_gym.envs import DEFAULT_ENV_ID

NAME = "evaluate"
HELP = "evaluate a learned agent or a policy on fixed seeds; JSON like `compare`"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agent", action="append", required=True, metavar="PATH_OR_NAME",
                   help="shipped agent name, model .zip, run folder, a policy name, or random "
                        "(masked random actions through the env) (repeatable)")
    p.add_argument("--scenario", default=None,
                   help="scenario name or YAML path (default: the agent's training scenario, else testbed)")
    add_data_root_arg(p)
    p.add_argument("--seeds", type=seeds_arg, default=[1000, 1001, 1002, 1003, 1004],
                   help="seeds, e.g. 1000-1004 (default; held out from training)")
    p.add_argument("--against", default="baseline", help="comma-separated reference policies run natively too")
    p.add_argument("--baseline", default="baseline", help="policy the ratios are relative to")
    p.add_argument("--stochastic", action="store_true", help="sample actions instead of the mode")
    p.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--table", action="store_true", help="print a table instead of JSON")
    out.add_argument("--json", action="store_true", help="print one JSON object (the default)")


def _is_policy_name(name: str) -> bool:
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.agents import policy_names

    return name in policy_names()


def run(args: argparse.Namespace) -> int:
    # evaluation imports pydantic: only when a config is validated
    from aryl_gym.train.evaluation import (
        RATIO_METRICS,
        mean_metrics,
        rows_for,
        run_agent,
        run_agent_batch,
        run_reference,
    )

    if any(not a.strip() for a in args.agent):  # was: "agent folder . holds no model.zip"
        raise ValueError("--agent '': give a shipped agent name, a model .zip, a run folder or a policy name")
    dup = sorted({a for a in args.agent if args.agent.count(a) > 1})
    if dup:
        raise ValueError(f"--agent {dup[0]} is given twice; each agent may appear once")
    names_list(args.against, "--against")
    agent_names = {Path(a).stem if a.endswith(".zip") else Path(a).name for a in args.agent}
    if args.baseline not in agent_names and args.baseline not in set(args.agent) and not _is_policy_name(args.baseline):
        # the registry imports every policy module: only to name them in the error
        from aryl_gym.agents import policy_names

        raise ValueError(
            f"--baseline {args.baseline!r} is neither a policy nor one of the --agent entries; "
            f"policies: {', '.join(policy_names())}"
        )

    t0 = time.perf_counter()

    def done(name: str) -> None:
        if not args.no_progress:
            print(f"evaluate: {name} done on {len(args.seeds)} seed(s), {time.perf_counter() - t0:.0f} s "
                  "elapsed", file=sys.stderr, flush=True)

    if args.stochastic and all(_is_policy_name(n) or n == "random" for n in args.agent):
        # was: accepted and unused (reference policies are deterministic; random samples anyway)
        raise ValueError("--stochastic samples a learned agent's actions; --agent names only reference "
                         "policies (add a learned agent, or drop --stochastic)")
    by_policy: dict = {}
    scenario = args.scenario
    for name in args.agent:
        if _is_policy_name(name):
            scen = scenario or "testbed"
            by_policy[name] = [run_reference(name, scen, s, args.data_root) for s in args.seeds]
            done(name)
            continue
        if name == "random":  # no native random policy registered: masked random through the env

            # evaluation imports pydantic: only when a config is validated
            from aryl_gym.train.evaluation import RandomMaskedAgent

            scen = scenario or "testbed"
            kw = {"data_root": args.data_root} if args.data_root else {}
            env = gym.make(DEFAULT_ENV_ID, scenario=scen, action_mode="sequential", **kw)
            rnd = RandomMaskedAgent(seed=0)
            by_policy[name] = [run_agent(rnd, env, s, deterministic=False)[0] for s in args.seeds]
            done(name)
            continue
        # at run time: aryl-gym imports every command module to build its parser
        from aryl_gym.agents.learned import load_agent

        agent = load_agent(name)
        scen = scenario or agent.scenario or "testbed"
        scenario = scen
        kw = {"data_root": args.data_root} if args.data_root else {}
        envs = [agent.make_env(scen, **kw) for _ in args.seeds]
        out = run_agent_batch(agent, envs, args.seeds, deterministic=not args.stochastic)
        deploy = dict(agent.config.get("deploy_env_kwargs") or {})
        if deploy:  # never silent: the agent acted with settings its training envs did not have
            # at run time: aryl-gym imports every command module to build its parser
            from aryl_gym.envs.damping import engaged_seeds

            engaged = engaged_seeds(envs, args.seeds)
            shield = (f"; the flap damping shield engaged on {len(engaged)} of {len(envs)} seed(s)"
                      f"{': ' + ', '.join(map(str, engaged)) if engaged else ''}"
                      if engaged is not None else "")
            print(f"evaluate: {agent.name} acted with its deploy_env_kwargs {deploy}{shield}",
                  file=sys.stderr, flush=True)
        for e in envs:
            e.close()
        by_policy[agent.name] = [r for r, _, _ in out]
        if args.baseline in (name, Path(name).stem, Path(name).name):
            args.baseline = agent.name  # the ratios and the column name the agent as it is listed
        done(agent.name)
    scen = scenario or "testbed"
    refs = [r.strip() for r in args.against.split(",") if r.strip()]
    if args.baseline not in by_policy and args.baseline not in refs:
        refs.append(args.baseline)  # the ratios' denominator always runs
    for ref in refs:
        if ref not in by_policy:
            by_policy[ref] = [run_reference(ref, scen, s, args.data_root) for s in args.seeds]
            done(ref)
    for name, res in by_policy.items():
        failed = [(s, r) for s, r in zip(args.seeds, res) if r.jobs_unfinished > 0]
        if failed:  # never silent: such an avg_jct covers the finished jobs only
            why = ", ".join(f"{s} ({'thrashing' if r.thrashing else 'stalled' if r.stalled else 'truncated'}, "
                            f"{r.jobs_unfinished} jobs)" for s, r in failed)
            print(f"evaluate: WARNING {name} left jobs unfinished on {len(failed)} of {len(res)} seed(s): "
                  f"{why}; its JCT figures count them up to the episode's end (censored: a lower "
                  "bound on what they would have been)", file=sys.stderr, flush=True)
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.commands.compare import METRICS, ratio_cis, summarize

    order = ([args.baseline] if args.baseline in by_policy else []) + [
        p for p in by_policy if p != args.baseline
    ]
    rows = [
        {"policy": r["policy"], "seed": r["seed"], **{m: r.get(m) for m in METRICS},
         # an episode ended early: its finished jobs' mean beside avg_jct (which counts the others)
         "jobs_unfinished": r.get("jobs_unfinished"),
         "avg_jct_finished": r.get("avg_jct_finished")}
        for name in order
        for r in rows_for(name, by_policy[name])
    ]
    _, raw = summarize(rows, order)
    rat = {p: {m: (v if math.isfinite(v) else None) for m, v in r.items()} for p, r in raw.items()}
    cis = ratio_cis(rows, order) if len(order) > 1 else {}
    if args.table:
        # at run time: aryl-gym imports every command module to build its parser
        from aryl_gym.commands._common import table

        keys = [k for k in RATIO_METRICS if k != "failed"]  # counted in the last column
        body = []
        for name in order:
            m = mean_metrics(by_policy[name], keys)
            failed = sum(r.jobs_unfinished > 0 for r in by_policy[name])
            st = cis[name]["avg_jct"] if name in cis else None
            ci = (f"{st.lo:.3f}..{st.hi:.3f}" if st is not None and math.isfinite(st.lo)
                  and math.isfinite(st.hi) else "-")
            body.append([name + (" †" if failed else ""), *[m[k] for k in keys],
                         (rat.get(name) or {}).get("avg_jct"), ci, f"{failed}/{len(by_policy[name])}"])
        print(f"scenario {scen}  seeds {','.join(map(str, args.seeds))}")
        print(table(body, ["policy", *keys, f"jct/{args.baseline}",
                           "95% CI (paired seeds, geo. mean of ratios)", "failed eps"]))
        if any(r.jobs_unfinished > 0 for res in by_policy.values() for r in res):
            # was: an episode ended early showed its finished jobs' avg JCT with no mark
            print("† left jobs unfinished in some episode: its JCT figures count them with their JCT "
                  "censored at the episode's end, a lower bound (the JSON's avg_jct_finished averages "
                  "the finished jobs only)")
        return 0
    json.dump({"scenario": str(scen), "seeds": list(args.seeds), "rows": rows, "ratios": rat,
               "ratio_ci": {p: {m: st.to_dict() for m, st in by.items()} for p, by in cis.items()}},
              sys.stdout)
    print()
    return 0
