"""``aryl-gym policies``: list the reference policies."""

from __future__ import annotations

import argparse
import inspect
import json

NAME = "policies"
HELP = "list the registered policy names"

#: One line per reference policy (the module docstrings say more).
DESCRIPTIONS = {
    "baseline": "the paper's Baseline (World v2): YARN FIFO on training servers (a job that does "
    "not fit is passed over), no loaning, no elasticity",
    "fifo": "strict FIFO: the head of the queue blocks the rest (World v1's Baseline)",
    "fifo-backfill": "FIFO where later jobs may pass a blocked head of the queue (= baseline)",
    "sjf": "shortest predicted job first (at the requested size), with backfill",
    "aryl": "Aryl: preemption-aware reclaim, SJF base demand, exact knapsack for extra workers",
    "aryl-pause": "Aryl whose knapsack values charge the resize pause (the other reading of the "
    "item value)",
    "aryl-noloan": "Aryl without capacity loaning (ablation)",
    "aryl-noelastic": "Aryl without elastic scaling: jobs at their requested size (ablation)",
    "aryl-nogroup": "Aryl without grouping flexible workers on loaned servers (paper Table 6)",
    "aryl-optimal-reclaim": "Aryl with the exact optimal reclaim (integer program, any size)",
    "aryl-default-reclaim": "Aryl with the simple reclaim rule (fewest busy GPUs first)",
    "aryl-trainfirst": "Aryl whose elastic jobs prefer training servers (diagnostic, ours)",
    "aryl-preempt": "Aryl that preempts jobs >= 2x longer than a queued job that does not fit (ours)",
    "aryl-hetero": "Aryl with heterogeneous training (paper 7.2): a hetero job on training servers "
    "may add flexible workers on loaned T4 servers",
    "aryl+tuned": "Aryl with Pollux's runtime batch-size tuning on every job (paper 7.4 "
    "Aryl+TunedJobs)",
    "aryl+tuned-loan": "aryl+tuned with capacity loaning",
    "aryl+pretuned": "Aryl on jobs submitted pre-tuned: each job's batch fixed at submission to the one "
    "that finishes it soonest at its request (the other reading of Aryl+TunedJobs)",
    "afs": "AFS-L (Hwang et al., NSDI '21), unbounded: elastic jobs up to the ceiling w_ceil",
    "afs-all": "AFS-L with every job resizable from 1 worker up to w_ceil (reading of afs)",
    "afs-bounded": "AFS-L inside each job's own worker range [w_min, w_max] (World v1 afs)",
    "afs-loan": "afs (unbounded) with capacity loaning",
    "pollux": "Pollux (Qiao et al., OSDI '21): fitted goodput model, batch tuning and genetic "
    "search every 60 s over every job's 0..64-GPU range, 100 generations",
    "pollux-250": "Pollux with 250 generations, as the Aryl paper ran it",
    "pollux-elastic": "pollux where only elastic families resize (inelastic jobs keep their "
    "request; reading)",
    "pollux-250-elastic": "pollux-250 where only elastic families resize (the reproduction's "
    "@pollux-elastic rows)",
    "gandiva": "Gandiva-style opportunistic grow and shrink into idle GPUs",
    "random": "uniformly random valid targets (seeded)",
}


def summary_line(doc: str | None) -> str:
    """A docstring's first paragraph on one line (was: its first line, often half a sentence)."""
    para = inspect.cleandoc(doc or "").split("\n\n")[0]
    return " ".join(para.split())


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object {name: description}")


def run(args: argparse.Namespace) -> int:
    # at run time: aryl-gym imports every command module to build its parser
    import sys

    from aryl_gym.agents import make_policy, policy_names
    from aryl_gym.agents.base import plugin_problems

    names = policy_names()
    problems = plugin_problems()
    texts = {}
    for name in names:
        text = DESCRIPTIONS.get(name)
        if text is None:
            try:  # a plugin whose factory fails is named, and the list still prints
                text = summary_line(type(make_policy(name)).__doc__)
            except Exception as exc:  # noqa: BLE001 - a plugin's own error
                problems.setdefault(name, f"its factory failed: {type(exc).__name__}: {exc}")
                continue
        texts[name] = text
    for name, why in sorted(problems.items()):
        print(f"aryl-gym policies: warning: plugin {name!r} cannot be used: {why}", file=sys.stderr)
    if args.json:
        print(json.dumps(texts))
        return 0
    width = max(len(n) for n in names) + 2
    for name, text in texts.items():
        print(f"{name:{width}s}{text}")
    return 0
