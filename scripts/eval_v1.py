"""Held-out evaluation of a learned agent at several loads, paired by seed, with bootstrap CIs.

    python scripts/eval_v1.py --agent v1=runs/RUN/best_model.zip --agent ppo-testbed --loads 0.9,1.3 \
        --seeds 2000-2011 --against aryl,sjf,random --json out.json

For each load (``workload.load`` of the scenario, default ``testbed``) the agent plays every seed
through its own env (``reset(options={"episode_seed": s})``, the same episode the native
references run on), the references run natively (``random``: uniformly random valid actions
through the env), and for each reference the table gives mean avg JCT(agent) / mean avg
JCT(reference) with a paired bootstrap 95% interval (seeds resampled with replacement, the same
draw for both; 10,000 replications, percentile interval), beside the geometric mean of the
per-seed ratios with its t interval (both from ``aryl_gym.stats``).

**At the paper's size** (issue 37): ``--scenario basic,production --loads default`` plays each
scenario at its own calibrated load (World v2: basic 1.3, production 0.6) on fresh seeds (the protocol's
held-out set for size: 8000-8009 on basic, 8000-8002 on production, never used for training or
selection), one table per scenario, paired by seed as above::

    python scripts/eval_v1.py --agent ppo-v1 --scenario basic --loads default --seeds 8000-8009 \
        --against aryl,sjf,fifo --json basic.json
    python scripts/eval_v1.py --agent ppo-v1 --scenario production --loads default --seeds 8000-8002 \
        --against aryl,sjf,fifo --json production.json

``ppo-v1`` is a set policy (no parameter depends on the window or the cluster size), so it acts
on any cluster without retraining; ``random`` at those sizes plays tens of thousands of steps per
episode and is left out of these rows.

An agent acts as deployed: with its ``deploy_env_kwargs`` (``ppo-v1-kickstart``: flap damping, docs/env.md;
the table says on which seeds the shield engaged). ``--undeployed LABEL`` plays that entry
without them, e.g. ``--agent ppo-v1-kickstart --agent raw=ppo-v1-kickstart --undeployed raw --against aryl,raw``.
``--env-kwargs LABEL=JSON`` plays that entry with these env arguments on top of its deployed
ones (a JSON object of ``Aryl-v2`` arguments, e.g. ``--agent bf=ppo-v1 --env-kwargs
'bf={"backfill": true}'``: the same weights deployed with backfill; docs/env.md). A key the env
does not take, or a value it refuses, stops the run before any episode with the env's message.
``--sampled LABEL`` makes that entry sample its actions from its masked policy instead of
taking the argmax (what PPO trains; torch's generator is seeded with 0 before the entry plays,
so a rerun gives the same episodes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from aryl_gym.commands._common import seeds_arg
from aryl_gym.stats import paired_bootstrap_ratio, paired_ratio_ci


def evaluate(agent_paths: list[str], scenario: Any, load: float | None, seeds: list[int], against: list[str],
             undeployed: tuple[str, ...] = (), sampled: tuple[str, ...] = (), world: str = "v2",
             env_kwargs: dict[str, dict] | None = None) -> dict:
    """One table: every agent and reference on ``seeds`` of ``scenario`` (a name, a YAML path or a
    :class:`~aryl_gym.config.ScenarioConfig`) at ``load`` (None: the
    scenario's own ``workload.load``), all in World ``world`` (the natives on the scenario as
    that world defines it, the agents and random through its env id)."""
    from aryl_gym.agents.learned import load_agent

    from aryl_gym.config import load_scenario
    from aryl_gym.envs.damping import engaged_seeds
    from aryl_gym.train.evaluation import RandomMaskedAgent, run_agent_batch, run_reference
    from aryl_gym.world_versions import in_world

    cfg = in_world(load_scenario(scenario) if isinstance(scenario, str) else scenario, world)
    env_id = f"aryl_gym/Aryl-{world}"
    if load is None:
        load = float(cfg.workload.load)
    else:
        cfg = cfg.replace(workload={"load": load})
    jct: dict[str, np.ndarray] = {}
    unfinished: dict[str, float] = {}
    thrashing: dict[str, list[int]] = {}  # seeds whose episode the thrash rule ended
    shielded: dict[str, list[int]] = {}  # seeds where the flap damping shield engaged
    done: dict[str, np.ndarray] = {}  # per seed: every job finished
    labels = []
    for path in agent_paths:
        label, _, path = path.rpartition("=") if "=" in path else ("", "", path)
        label = label or path
        labels.append(label)
        agent = load_agent(path)
        # an agent in ``undeployed`` acts without its deploy_env_kwargs (e.g. no flap damping)
        extra = (env_kwargs or {}).get(label, {})
        envs = [agent.make_env(scenario=cfg, deployed=label not in undeployed, env_id=env_id, **extra)  # type: ignore[arg-type]
                for _ in seeds]
        t0 = time.perf_counter()
        if label in sampled:
            import torch as th

            th.manual_seed(0)
        out = run_agent_batch(agent, envs, seeds, deterministic=label not in sampled)
        shielded[label] = engaged_seeds(envs, seeds) or []
        print(f"load {load}: {label} played {len(seeds)} seeds in {time.perf_counter() - t0:.0f} s",
              file=sys.stderr, flush=True)
        jct[label] = np.array([r.avg_jct for r, _, _ in out])
        done[label] = np.array([r.jobs_unfinished == 0 for r, _, _ in out])
        unfinished[label] = float(np.mean([r.jobs_unfinished for r, _, _ in out]))
        thrashing[label] = [s for s, (r, _, _) in zip(seeds, out) if r.thrashing]
    for name in against:
        if name in jct:  # another agent of this run (LABEL=PATH): compared as it played
            continue
        if name == "random":
            import gymnasium as gym

            res = []
            for s in seeds:
                env = gym.make(env_id, scenario=cfg, action_mode="sequential")
                res.append(run_agent_batch(RandomMaskedAgent(seed=s), [env], [s])[0][0])
        else:
            res = [run_reference(name, cfg, s) for s in seeds]
        jct[name] = np.array([r.avg_jct for r in res])
        done[name] = np.array([r.jobs_unfinished == 0 for r in res])
        unfinished[name] = float(np.mean([r.jobs_unfinished for r in res]))
        thrashing[name] = [s for s, r in zip(seeds, res) if r.thrashing]
    rows: dict[str, dict[str, dict[str, float]]] = {}
    for label in labels:
        rows[label] = {}
        for name in against:
            if name == label:
                continue
            point, lo, hi = paired_bootstrap_ratio(jct[label], jct[name])
            st = paired_ratio_ci([a / b for a, b in zip(jct[label], jct[name])])
            rows[label][name] = {"ratio_of_means": point, "boot_lo": lo, "boot_hi": hi,
                                 "geo_mean": st.mean, "t_lo": st.lo, "t_hi": st.hi}
            if len(seeds) < 2:  # one seed has no spread: an interval of zero width would mislead
                for k in ("boot_lo", "boot_hi", "t_lo", "t_hi"):
                    rows[label][name][k] = None
            both = done[label] & done[name]  # the seeds where both finish every job
            if both.any() and not both.all():
                fp, flo, fhi = paired_bootstrap_ratio(jct[label][both], jct[name][both])
                if both.sum() < 2:
                    flo = fhi = None
                rows[label][name].update(finished_seeds=int(both.sum()), finished_ratio=fp,
                                         finished_lo=flo, finished_hi=fhi)
    return {"scenario": scenario if isinstance(scenario, str) else cfg.name, "world": world, "load": load, "seeds": seeds, "agents": labels,
            "env_kwargs": {k: v for k, v in (env_kwargs or {}).items() if v},
            "avg_jct": {k: v.tolist() for k, v in jct.items()},
            "mean_avg_jct": {k: float(v.mean()) for k, v in jct.items()},
            "jobs_unfinished": unfinished, "thrashing_seeds": thrashing, "damped_seeds": shielded,
            "failed_seeds": {k: [s for s, ok in zip(seeds, v) if not ok] for k, v in done.items()},
            "vs": rows}


def loads_arg(text: str) -> list[float | None]:
    """``0.9,1.3`` -> [0.9, 1.3]; ``default`` -> [None] (each scenario's own load); anything else
    is an argparse error saying what is expected."""
    from aryl_gym.load_grid import parse_loads

    if text.strip() == "default":
        return [None]
    try:  # the load grid's parser: distinct loads in (0, 10] (1e9 used to allocate 968 GiB)
        return list(parse_loads(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{str(exc).replace('--load-grid', '--loads')}; e.g. 0.9,1.3, or default (the scenario's own load)") from None


def env_kwargs_arg(p: argparse.ArgumentParser, items: list[str], labels: list[str]) -> dict[str, dict]:
    """``--env-kwargs LABEL=JSON`` entries as ``{label: kwargs}``: each must name an ``--agent``
    label once and hold a JSON object; anything else is an argparse error saying what is
    expected."""
    out: dict[str, dict] = {}
    for item in items:
        label, sep, text = item.partition("=")
        if not sep or not label:
            p.error(f"--env-kwargs {item!r}: expected LABEL=JSON, e.g. 'bf={{\"backfill\": true}}'")
        if label not in labels:
            p.error(f"--env-kwargs {label!r} names no --agent entry (labels: {', '.join(labels)})")
        if label in out:
            p.error(f"--env-kwargs {label!r} is given twice; put every argument in one JSON object")
        try:
            kw = json.loads(text)
        except json.JSONDecodeError as exc:
            p.error(f"--env-kwargs {label!r}: not JSON ({exc.msg} at character {exc.pos}): {text!r}")
        if not isinstance(kw, dict):
            p.error(f"--env-kwargs {label!r}: expected a JSON object of env arguments, got {text!r}")
        from aryl_gym.envs.options import MAX_WINDOW, EnvOptions

        if "scenario" in kw or "world_version" in kw:
            p.error(f"--env-kwargs {label!r}: the scenario and world come from --scenario and --world")
        known = set(EnvOptions.names()) - {"scenario", "world_version"}
        unknown = sorted(set(kw) - known)
        if unknown:
            p.error(f"--env-kwargs {label!r}: {', '.join(map(repr, unknown))} is not an argument of the env "
                    f"(arguments: {', '.join(sorted(known))})")
        try:  # the values on their own (the agent's training arguments are checked when it plays)
            EnvOptions(**{"window": MAX_WINDOW, **kw})
        except (TypeError, ValueError) as exc:
            p.error(f"--env-kwargs {label!r}: {exc}")
        out[label] = kw
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agent", action="append", required=True,
                   help="a shipped name or model path, optionally LABEL=PATH; repeat for several")
    p.add_argument("--scenario", default="testbed",
                   help="a scenario, or several comma-separated (e.g. basic,production: one table each)")
    p.add_argument("--loads", type=loads_arg, default=[0.9, 1.3])
    p.add_argument("--seeds", type=seeds_arg, default=list(range(2000, 2012)))
    p.add_argument("--against", default="aryl,sjf,random,baseline",
                   help="references (policy names, random) and/or LABELs of --agent entries")
    p.add_argument("--undeployed", action="append", default=[], metavar="LABEL",
                   help="this agent acts without its deploy_env_kwargs (e.g. without flap damping); repeatable")
    p.add_argument("--sampled", action="append", default=[], metavar="LABEL",
                   help="this agent samples its actions (seeded) instead of acting by argmax; repeatable")
    p.add_argument("--env-kwargs", action="append", default=[], metavar="LABEL=JSON",
                   help="this agent acts with these env arguments on top of its deployed ones, e.g. "
                        "'bf={\"backfill\": true}'; repeatable")
    p.add_argument("--json", default=None)
    p.add_argument("--world", choices=("v1", "v2"), default="v2",
                   help="the world every entrant plays (v1: the figures of agents/pretrained/*.md)")
    a = p.parse_args()
    labels = [x.rpartition("=")[0] or x for x in a.agent]
    for flag, names in (("--undeployed", a.undeployed), ("--sampled", a.sampled)):
        for u in names:
            if u not in labels:
                p.error(f"{flag} {u!r} names no --agent entry (labels: {', '.join(labels)})")
    env_kwargs = env_kwargs_arg(p, a.env_kwargs, labels)
    against = [x.strip() for x in a.against.split(",") if x.strip()]
    scenarios = [x.strip() for x in a.scenario.split(",") if x.strip()]
    if not scenarios:  # was: nothing played, nothing printed, exit 0
        p.error(f"--scenario {a.scenario!r}: give at least one scenario, e.g. testbed or basic,production")
    if not against:  # was: a table with no comparison
        p.error(f"--against {a.against!r}: give at least one reference, e.g. aryl,sjf")
    from aryl_gym.config import ConfigError, load_scenario
    from aryl_gym.fileio import atomic_write_text, check_output_file

    if a.json:
        try:  # before any episode: the work is never lost to an unwritable --json
            check_output_file(a.json, "--json file")
        except ConfigError as exc:
            p.error(f"--json: {exc}")

    for sc in scenarios:
        try:
            cfg = load_scenario(sc)
        except (ConfigError, OSError, ValueError) as exc:
            p.error(f"--scenario {sc!r}: {exc}")
        fixed = (f"replays a trace ({cfg.workload.trace})" if cfg.workload.trace else
                 f"fixes workload.num_jobs={cfg.workload.num_jobs}" if cfg.workload.num_jobs is not None else None)
        if fixed and a.loads != [None]:  # every load would be the same episodes, reported as different
            p.error(f"--loads: scenario {sc!r} {fixed}, so workload.load does not change its episodes; "
                    "use --loads default")
    # every entrant is checked before any episode: an unknown agent or reference used to fail
    # after the others had played
    from aryl_gym.agents import policy_names
    from aryl_gym.agents.learned import resolve_agent_path

    for x in a.agent:
        path = x.rpartition("=")[2]
        try:
            resolve_agent_path(path)
        except (ConfigError, OSError, ValueError) as exc:
            p.error(f"--agent {x!r}: {exc}")
    for flag, names in (("--agent", labels), ("--against", against), ("--scenario", scenarios)):
        dup = sorted({x for x in names if names.count(x) > 1})
        if dup:  # was: played and counted twice
            p.error(f"{flag}: {dup[0]!r} is given twice; give each once (LABEL=PATH tells two entries apart)")
    known = set(policy_names()) | {"random"} | set(labels)
    for name in against:
        if name not in known:
            p.error(f"--against {name!r}: neither a policy, random nor an --agent label "
                    f"(labels: {', '.join(labels)}; policies: {', '.join(policy_names())})")
    results = []
    for scenario in scenarios:
        for load in a.loads:
            r = evaluate(list(a.agent), scenario, load, list(a.seeds), against, tuple(a.undeployed),
                         tuple(a.sampled), a.world, env_kwargs)
            results.append(r)
            if a.json:  # after every table, so a killed run keeps what it finished
                atomic_write_text(a.json, json.dumps(results, indent=2))
            _print_table(r)


def _print_table(r: dict) -> None:
    """The Markdown tables of one :func:`evaluate` result."""
    print(f"\n### {r['scenario']}, load {r['load']} ({len(r['seeds'])} seeds {r['seeds'][0]}-{r['seeds'][-1]})\n")
    print("| policy | mean avg JCT (s) | jobs unfinished (mean per seed) | episodes failed "
          "| seeds ended by the thrash rule | flap damping engaged on |")
    print("|---|---|---|---|---|---|")
    for name, v in r["mean_avg_jct"].items():
        th = r["thrashing_seeds"][name]
        nf = len(r["failed_seeds"][name])
        dm = r["damped_seeds"].get(name)
        dm_txt = ("-" if dm is None else "none" if not dm
                  else ", ".join(map(str, dm)) if len(dm) <= 6 else f"{len(dm)} seeds")
        print(f"| {name} | {v:,.0f} | {r['jobs_unfinished'][name]:.1f} | {nf}/{len(r['seeds'])} "
              f"| {', '.join(map(str, th)) or '-'} | {dm_txt} |")
    if any(r["jobs_unfinished"].values()):
        print("\n(an episode with unfinished jobs counts them with their JCT censored at the "
              "episode's end, a lower bound on what they would have taken; the last column of the "
              "next table leaves such seeds out)")
    print("\n| agent | vs | ratio of means | paired bootstrap 95% CI | geo-mean per-seed ratio [t 95% CI] "
          "| on the seeds both finish [95% CI] |")
    print("|---|---|---|---|---|---|")
    for label, vs in r["vs"].items():
        for name, v in vs.items():
            fin = (f"{v['finished_ratio']:.3f} {_ci(v['finished_lo'], v['finished_hi'])} "
                   f"({v['finished_seeds']} seeds)" if "finished_ratio" in v else "(all seeds)")
            print(f"| {label} | {name} | {v['ratio_of_means']:.3f} | {_ci(v['boot_lo'], v['boot_hi'])} | "
                  f"{v['geo_mean']:.3f} {_ci(v['t_lo'], v['t_hi'])} | {fin} |", flush=True)


def _ci(lo: float | None, hi: float | None) -> str:
    """``[lo, hi]``, or why there is no interval (one seed has no spread)."""
    return "[n/a: one seed]" if lo is None or hi is None else f"[{lo:.3f}, {hi:.3f}]"


if __name__ == "__main__":
    main()
