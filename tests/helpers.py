"""Small builders shared by the tests: hand-made clusters, jobs and policies."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
from aryl_gym.agents.base import BasePolicy
from hypothesis import settings

from aryl_gym.config import ScenarioConfig, scenario_from_dict
from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.jobs import JobSpec
from aryl_gym.sim.view import ClusterView, Decision, PlacementOptions


def load_script(name: str) -> ModuleType:
    """``scripts/NAME.py`` loaded as a module (the scripts folder is not a package)."""
    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_script", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def small_config(
    train_servers: int = 2,
    train_gpus: int = 4,
    inf_servers: int = 2,
    inf_gpus: int = 4,
    interval: float = 60.0,
    **sim: object,
) -> ScenarioConfig:
    return scenario_from_dict(
        {
            "name": "hand",
            "cluster": {
                "train_servers": train_servers,
                "train_gpus_per_server": train_gpus,
                "inf_servers": inf_servers,
                "inf_gpus_per_server": inf_gpus,
            },
            "inference": {"mode": "constant", "mean": 0.0, "headroom": 0.0},
            "sim": {"interval": interval, **sim},
        }
    )


def job(
    i: int,
    submit: float = 0.0,
    work: float = 600.0,
    g: int = 1,
    w: int = 1,
    w_min: int | None = None,
    elastic: bool = False,
    ta: bool = False,
    family: str = "cnn",
    w_req: int = 0,
) -> JobSpec:
    """A job of ``w`` workers at most; ``w_req`` 0 = it requests ``w_min`` (World v1)."""
    return JobSpec(
        id=i,
        submit=submit,
        family=family,
        g=g,
        w_min=w_min if w_min is not None else w,
        w_max=w,
        elastic=elastic,
        type_agnostic=ta,
        work=work,
        pred_work=work,
        w_req=w_req,
    )


def util_series(values: list[float] | float, n: int = 2000) -> np.ndarray:
    if isinstance(values, (int, float)):
        return np.full(n, float(values))
    return np.asarray(values, dtype=float)


def make_sim(cfg: ScenarioConfig, jobs: list[JobSpec], util: float | list[float] = 0.0) -> Simulator:
    return Simulator(cfg, jobs, util_series(util), seed=0)


class ScriptedPolicy(BasePolicy):
    """Returns decisions from a function of the view; for hand-made cases."""

    name = "scripted"

    def __init__(self, fn, uses_loaning: bool = True, group_flexible: bool = True, event_driven=True):
        self.fn = fn
        self.uses_loaning = uses_loaning
        self.placement = PlacementOptions(True, group_flexible)
        self.event_driven = event_driven

    def decide(self, view: ClusterView) -> Decision:
        return self.fn(view)


def examples(ci: int) -> int:
    """``ci`` examples under the default Hypothesis profile, scaled by the active one (the
    ``deep`` profile of tests/conftest.py runs 10x): use as ``@settings(max_examples=examples(40))``."""
    from tests.conftest import CI_EXAMPLES

    return max(1, ci * settings().max_examples // CI_EXAMPLES)


def play_sjf_grant(env, episode_seed: int = 7):  # type: ignore[no-untyped-def]
    """One episode of ``env`` (``sequential`` mode) played by the SJF-grant rule from
    ``reset(seed=0, options={"episode_seed": ...})``: (undiscounted return, last info, terminated)."""
    from aryl_gym.train.bc import sjf_grant

    obs, _ = env.reset(seed=0, options={"episode_seed": episode_seed})
    total = 0.0
    while True:
        obs, r, term, trunc, info = env.step(sjf_grant(env, obs))
        total += r
        if term or trunc:
            return total, info, term


def play_thrasher(env, max_steps: int, check=None):  # type: ignore[no-untyped-def]
    """Play the thrashing agent of tests/test_thrash.py on a reset ``sequential`` env with
    preemption: after the first simulated hour it releases whatever it can, else grants, else
    commits. ``check(u, mask)`` runs before every step (``u`` the unwrapped env). Returns the
    final info and whether the episode was truncated; more than ``max_steps`` steps is a test
    failure."""
    u = env.unwrapped
    k = u.k
    steps = 0
    while True:
        m = u.action_masks()
        if check is not None:
            check(u, m)
        rel = np.flatnonzero(m[k:2 * k])
        grants = np.flatnonzero(m[:k])
        if u.sim.now > 3600.0 and len(rel):
            a = k + int(rel[0])
        elif len(grants):
            a = int(grants[0])
        else:
            a = 2 * k
        _, _, term, trunc, info = env.step(a)
        steps += 1
        if term or trunc:
            return info, bool(trunc)
        assert steps < max_steps


def tiny_loan_scenario(start_hour: float = 0.0) -> ScenarioConfig:
    """``tiny`` with 8 inference servers and 5-minute noise on the inference series: loans
    change often, so reclaims (and preemptions by them) happen in a 3-hour episode (Aryl on
    seeds 0-2 at ``start_hour`` 0: 16-30 reclaimed servers, 3-5 preempted jobs; at 16: more
    preemptions). ``tiny`` itself never loans a server (its 2 inference servers keep headroom)."""
    import dataclasses

    from aryl_gym.config import load_scenario

    base = load_scenario("tiny")
    return dataclasses.replace(
        base,
        name="tiny-loan",
        cluster=dataclasses.replace(base.cluster, inf_servers=8),
        inference=dataclasses.replace(base.inference, start_hour=start_hour, sample_noise=0.08),
    )
