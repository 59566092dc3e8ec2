"""The env at the paper's scale (issue 37): step cost by cluster size, vector envs, a learned
agent's episodes. ``aryl-gym bench --only scale`` prints these rows with their targets:

* ``steps``: env steps per CPU-second of this process (``sequential`` mode, window 32,
  observation v1, uniformly random *allowed* actions, one core) on ``testbed`` and
  ``production`` (and ``basic``), over a fixed trajectory: ``reset(seed=0)``, ``WARMUP`` steps
  untimed (past the empty start of an episode), then ``STEPS`` timed steps. Targets: at least
  10,000 on ``testbed`` and 5,000 on ``production``, production within 2x of testbed.
  With ``--baseline DIR`` (a checkout of an earlier commit) the same trajectories are also
  played by that code, in the same run, in ABBA order (now, before, before, now; each figure
  the mean of its two runs), each in a fresh process: "before" and "now" side by side.
* ``vector``: ``gym.make_vec(id, num_envs=8)`` (the batched :class:`aryl_gym.envs.vector.ArylVectorEnv`)
  against 8 ``gym.make`` envs in Gymnasium's ``SyncVectorEnv``, same process, same settings
  and actions; target: at least 1.5x. A third row is the ceiling of any vector layer that
  keeps one Python env per simulator: the 8 envs stepped by their own ``_step_core`` and
  ``_write_obs`` into preallocated rows, nothing else. The three are measured in the order
  A B C C B A, each figure the mean of its two runs (the ``runs`` column).
* ``episode``: one ``basic`` episode of the shipped ``ppo-v1`` through the env (CPU seconds,
  its forward passes included; target <= 10 s) and, unless ``--quick``, one
  ``production`` episode (target <= 2 minutes). Needs the ``train`` extra.

The step figures are printed, not asserted: the machine is shared and noisy. CPU time of the
measuring process is reported (a busy machine inflates wall time far more than CPU time).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

#: a checkout whose code the step rows also measure (``aryl-gym bench --baseline DIR``)
BASELINE: str | None = None

#: steps played untimed after the reset, then timed, per scenario
WARMUP = {"testbed": 500, "basic": 1500, "production": 3000}
STEPS = {"testbed": 20_000, "basic": 8_000, "production": 8_000}
QUICK_STEPS = {"testbed": 5_000, "basic": 2_000, "production": 2_000}
TARGETS = {"testbed": 10_000, "production": 5_000}

#: The measurement, as a script that needs only the public API (so an earlier checkout runs it
#: too): prints {"steps", "cpu_s", "wall_s"} as JSON.
STEP_SCRIPT = r"""
import json, sys, time
import numpy as np
import gymnasium as gym
import aryl_gym  # noqa: F401
scenario, warmup, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
env = gym.make("aryl_gym/Aryl-v2", scenario=scenario, action_mode="sequential", window=32,
               observation="v1").unwrapped
rng = np.random.default_rng(0)
env.reset(seed=0)
def play(n):
    for _ in range(n):
        ok = np.flatnonzero(env.action_masks())
        _, _, te, tr, _ = env.step(int(ok[rng.integers(len(ok))]))
        if te or tr:
            env.reset()
play(warmup)
c0, w0 = time.process_time(), time.perf_counter()
play(steps)
print(json.dumps({"steps": steps, "cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - w0}))
"""


def _overlay(checkout: Path) -> Path:
    """A directory to put on ``PYTHONPATH`` so that ``import aryl_gym`` (with
    ``aryl_gym.agents`` and ``aryl_gym.configs``, which live at the top of a checkout) imports
    ``checkout``'s code."""
    checkout = checkout.resolve()
    if not (checkout / "aryl_gym" / "__init__.py").is_file():
        raise ValueError(f"--baseline {checkout}: not a checkout of aryl-gym (no aryl_gym/__init__.py)")
    if not (checkout / "aryl_gym" / "envs").is_dir() or not (
            (checkout / "agents").is_dir() or (checkout / "aryl_gym" / "agents").is_dir()):
        raise ValueError(f"--baseline {checkout}: not a checkout of aryl-gym (no aryl_gym/envs/ or agents/)")
    if (checkout / "aryl_gym" / "agents").exists():
        return checkout
    tmp = Path(tempfile.mkdtemp(prefix="aryl-gym-baseline-"))
    pkg = tmp / "aryl_gym"
    pkg.mkdir()
    for entry in (checkout / "aryl_gym").iterdir():
        (pkg / entry.name).symlink_to(entry)
    for name in ("agents", "configs"):
        if (checkout / name).exists():
            (pkg / name).symlink_to(checkout / name)
    return tmp


def _measure(scenario: str, warmup: int, steps: int, pythonpath: Path | None) -> dict[str, float]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    # -P and a neutral working directory: nothing but PYTHONPATH and the installed package
    # decides which aryl_gym is imported
    out = subprocess.run(
        [sys.executable, "-P", "-c", STEP_SCRIPT, scenario, str(warmup), str(steps)],
        capture_output=True, text=True, env=env, check=False, cwd=tempfile.gettempdir(),
    )
    if out.returncode != 0:
        if pythonpath is not None:  # the other checkout's code: the user's input, said in one line
            last = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise ValueError(f"--baseline: the step benchmark ({scenario}) failed with that checkout's code: {last}")
        raise RuntimeError(f"step benchmark ({scenario}, this checkout) failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_steps(quick: bool = False, baseline: str | Path | None = None,
                scenarios: tuple[str, ...] = ("testbed", "basic", "production")) -> list[dict[str, Any]]:
    """Env steps per CPU-second now (and with ``baseline``'s code), one row per scenario."""
    base = _overlay(Path(baseline)) if baseline else None
    try:
        return _bench_steps(quick, base, scenarios)
    finally:  # the overlay made for a checkout without aryl_gym/agents (symlinks only), never the checkout
        if base is not None and baseline and base != Path(baseline).resolve():
            shutil.rmtree(base, ignore_errors=True)


def _bench_steps(quick: bool, base: Path | None, scenarios: tuple[str, ...]) -> list[dict[str, Any]]:
    rows = []
    for sc in scenarios:
        n = (QUICK_STEPS if quick else STEPS)[sc]
        w = WARMUP[sc]
        now: list[dict[str, float]] = []
        before: list[dict[str, float]] = []
        order = ("now", "before", "before", "now") if base is not None else ("now",)
        for who in order:
            r = _measure(sc, w, n, base if who == "before" else None)
            (now if who == "now" else before).append(r)

        def rate(rs: list[dict[str, float]]) -> float:
            return sum(r["steps"] for r in rs) / sum(r["cpu_s"] for r in rs)

        row: dict[str, Any] = {"scenario": sc, "steps": n, "steps/cpu-s now": rate(now)}
        if before:
            row["steps/cpu-s before"] = rate(before)
            row["speed-up"] = rate(now) / rate(before)
        row["target"] = TARGETS.get(sc)
        row["met"] = (rate(now) >= TARGETS[sc]) if sc in TARGETS else None
        rows.append(row)
    by: dict[str, float] = {str(r["scenario"]): float(r["steps/cpu-s now"]) for r in rows}
    if "testbed" in by and "production" in by:
        rows.append({"scenario": "testbed / production", "steps": None,
                     "steps/cpu-s now": by["testbed"] / by["production"], "target": 2.0,
                     "met": by["testbed"] / by["production"] <= 2.0})
    return rows


def _random_masked(masks: Any, rng: Any) -> Any:
    """One uniformly random allowed action per row of stacked ``sequential`` masks."""
    u = rng.random(masks.shape) * (masks > 0.5)
    return u.argmax(axis=1).astype(np.int64)


def bench_vector(num_envs: int = 8, scenario: str = "testbed", steps: int = 4_000,
                 **kwargs: Any) -> list[dict[str, Any]]:
    """Steps per CPU-second (summed over envs) of Gymnasium's ``SyncVectorEnv`` over N ``gym.make``
    envs, of ``gym.make_vec(num_envs=N)`` (the batched vector env) and of the envs' own work (the
    ceiling, :func:`_envs_own_work`), same actions. Each is measured twice, in the order A B C C
    B A, and reported as the mean of its two runs, so that a slow spell of a shared machine
    weighs on all three alike rather than on one (a ratio of two short runs taken one after the
    other can read 1.2x or 1.7x on the same code)."""

    import aryl_gym  # noqa: F401

    kw = {"scenario": scenario, "action_mode": "sequential", "window": 32, "observation": "v1", **kwargs}
    names = ("SyncVectorEnv of gym.make", "gym.make_vec (batched)", "envs' own work (ceiling)")
    runs: dict[str, list[float]] = {n: [] for n in names}
    for name in (*names, *reversed(names)):
        if name == names[2]:
            runs[name].append(_envs_own_work(num_envs, scenario, steps, kw)["steps/cpu-s"])
            continue
        if name == names[1]:
            v = gym.make_vec("aryl_gym/Aryl-v2", num_envs=num_envs, **kw)
        else:
            v = gym.vector.SyncVectorEnv([lambda: gym.make("aryl_gym/Aryl-v2", **kw)] * num_envs)
        rng = np.random.default_rng(0)
        obs, _ = v.reset(seed=0)
        for _ in range(200):  # warm up
            obs, *_ = v.step(_random_masked(obs["action_mask"], rng))
        c0 = time.process_time()
        for _ in range(steps // num_envs):
            obs, *_ = v.step(_random_masked(obs["action_mask"], rng))
        cpu = time.process_time() - c0
        v.close()
        runs[name].append(steps // num_envs * num_envs / cpu)
    n = steps // num_envs * num_envs
    out: list[dict[str, Any]] = [
        {"vector env": name, "num_envs": num_envs, "scenario": scenario, "env steps": n,
         "steps/cpu-s": sum(runs[name]) / len(runs[name]),
         "runs": ", ".join(f"{x:,.0f}" for x in runs[name])}
        for name in names
    ]
    for r in out[1:]:
        r["x SyncVectorEnv"] = r["steps/cpu-s"] / out[0]["steps/cpu-s"]
    out[1]["target"] = 1.5
    out[1]["met"] = out[1]["x SyncVectorEnv"] >= 1.5
    return out


def _envs_own_work(num_envs: int, scenario: str, steps: int, kw: dict[str, Any]) -> dict[str, Any]:
    """The ceiling of any vector layer over these envs: N unwrapped envs stepped by their own
    ``_step_core`` and ``_write_obs`` into preallocated rows, no infos merged, no autoreset
    bookkeeping (a layer that keeps one Python env per simulator cannot be faster)."""
    import aryl_gym  # noqa: F401

    envs: list[Any] = [gym.make("aryl_gym/Aryl-v2", **kw).unwrapped for _ in range(num_envs)]
    obs0, _ = envs[0].reset(seed=0)
    buf = {k: np.zeros((num_envs, *v.shape), dtype=v.dtype) for k, v in obs0.items()}
    rows = [{k: v[i] for k, v in buf.items()} for i in range(num_envs)]
    for i, e in enumerate(envs):
        o, _ = e.reset(seed=i)
        for k in buf:
            buf[k][i] = o[k]
    rng = np.random.default_rng(0)

    def step_all() -> None:
        acts = _random_masked(buf["action_mask"], rng)
        for i, e in enumerate(envs):
            _, te, tr, _ = e._step_core(int(acts[i]))
            if te or tr:
                o, _ = e.reset()
                for k in buf:
                    buf[k][i] = o[k]
            else:
                e._write_obs(rows[i])

    for _ in range(200):
        step_all()
    c0 = time.process_time()
    for _ in range(steps // num_envs):
        step_all()
    cpu = time.process_time() - c0
    n = steps // num_envs * num_envs
    return {"vector env": "envs' own work (ceiling)", "num_envs": num_envs, "scenario": scenario,
            "env steps": n, "steps/cpu-s": n / cpu}


def bench_episode(scenario: str, agent: str = "ppo-v1", seed: int = 0, numpy: bool = True) -> dict[str, Any]:
    """One episode of a shipped learned agent through the env: CPU and wall seconds, steps.
    ``numpy=False``: a set policy acts through its torch trace only (``LearnedAgent.numpy``)."""
    # torch and the agent adapter: the learned-agent timing only (the train extra)
    import torch

    from aryl_gym.agents.learned import load_agent

    torch.set_num_threads(1)
    ag = load_agent(agent)
    ag.numpy = numpy
    env = ag.make_env(scenario)
    c0, w0 = time.process_time(), time.perf_counter()
    obs, _ = env.reset(seed=seed, options={"episode_seed": seed})
    steps = 0
    pred = 0.0
    while True:
        t = time.process_time()
        act, _ = ag.predict(obs, deterministic=True)
        pred += time.process_time() - t
        obs, _, te, tr, info = env.step(act)
        steps += 1
        if te or tr:
            break
    cpu = time.process_time() - c0
    res = info["episode_result"]
    target = {"basic": 10.0, "production": 120.0}.get(scenario)
    return {"scenario": scenario, "agent": agent, "seed": seed, "steps": steps, "jobs": res.jobs_total,
            "cpu s": cpu, "wall s": time.perf_counter() - w0, "agent cpu s": pred,
            "avg JCT": res.avg_jct, "target s": target, "met": (cpu <= target) if target else None}


def bench_scale(quick: bool = False, baseline: str | Path | None = None) -> list[dict[str, Any]]:
    """All rows of ``aryl-gym bench --only scale`` (one table; unused columns are blank)."""
    rows: list[dict[str, Any]] = [{"what": "steps", **r} for r in bench_steps(quick, baseline)]
    rows += [{"what": "vector", **r} for r in bench_vector(steps=2_000 if quick else 8_000)]
    try:
        import torch  # noqa: F401
    except ImportError:  # the train extra is not installed
        return rows
    rows.append({"what": "episode", **bench_episode("basic")})
    if not quick:
        rows.append({"what": "episode", **bench_episode("production")})
    return rows


if __name__ == "__main__":  # pragma: no cover - manual benchmark
    print(json.dumps(bench_scale(quick="--quick" in sys.argv,
                                 baseline=next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--baseline=")), None)),
                     indent=1, default=float))
