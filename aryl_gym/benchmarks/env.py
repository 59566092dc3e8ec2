"""Environment throughput benchmark (issue 5 targets; SPEC 8).

``bench_env()`` measures env steps per second with random *masked* actions (a uniformly random
allowed level per slot in ``targets``, a uniformly random allowed action in ``sequential``,
uniform scores in ``priority``), single env, per action mode, on ``tiny`` and ``testbed``; and
the throughput of 2-env ``sync`` and ``async`` vector envs (``targets`` mode, ``testbed``).
Target: at least 5,000 steps/s on ``testbed`` in ``targets`` mode on one core.

Run: ``python -m aryl_gym.benchmarks.env`` (prints a Markdown table).
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np


def _random_action(env: Any, rng: np.random.Generator) -> Any:
    u = env.unwrapped
    mask = u.action_masks()
    if u.action_mode == "targets":
        m = mask.reshape(u.k, -1)
        return (rng.random(m.shape) * m).argmax(axis=1)  # uniform among allowed levels
    if u.action_mode == "sequential":
        return int(rng.choice(np.flatnonzero(mask)))
    return rng.uniform(-1.0, 1.0, u.k).astype(np.float32)


def env_steps_per_second(scenario: str, action_mode: str, seconds: float = 2.0, seed: int = 0) -> dict[str, Any]:
    """Steps/s of one env with random masked actions for about ``seconds`` of wall time."""

    env = gym.make("aryl_gym/Aryl-v2", scenario=scenario, action_mode=action_mode).unwrapped
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    steps = episodes = 0
    t0, c0 = time.perf_counter(), time.process_time()
    while True:
        _, _, te, tr, _ = env.step(_random_action(env, rng))
        steps += 1
        if te or tr:
            episodes += 1
            env.reset()
        if steps % 64 == 0 and time.perf_counter() - t0 >= seconds:
            break
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return _row(f"env/{scenario}/{action_mode}", scenario, action_mode, "single", 1, steps, dt, cpu)


def _row(name: str, scenario: str, mode: str, vec: str, n: int, steps: int, wall: float,
         cpu: float | None) -> dict[str, Any]:
    return {
        "name": name,
        "scenario": scenario,
        "action_mode": mode,
        "vectorization": vec,
        "num_envs": n,
        "steps": steps,
        "wall_s": round(wall, 3),
        "steps_per_s": steps / wall,
        # CPU time of this process (a busy machine does not inflate it); None for async,
        # whose work runs in subprocesses
        "cpu_steps_per_s": steps / cpu if cpu else None,
    }


def vector_steps_per_second(mode: str, scenario: str = "testbed", num_envs: int = 2,
                            seconds: float = 2.0, seed: int = 0) -> dict[str, Any]:
    """Env steps/s (summed over envs) of a ``sync`` or ``async`` vector env, ``targets`` mode,
    random actions masked by the observation's ``action_mask``."""

    v = gym.make_vec("aryl_gym:Aryl-v2", num_envs=num_envs, vectorization_mode=mode, scenario=scenario)
    try:
        rng = np.random.default_rng(seed)
        obs, _ = v.reset(seed=seed)
        k = obs["jobs"].shape[1]
        steps = 0
        t0, c0 = time.perf_counter(), time.process_time()
        while True:
            m = obs["action_mask"].reshape(num_envs, k, -1)
            a = (rng.random(m.shape) * m).argmax(axis=2)
            obs, _, _, _, _ = v.step(a)
            steps += num_envs
            if steps % 64 == 0 and time.perf_counter() - t0 >= seconds:
                break
        dt = time.perf_counter() - t0
        cpu = time.process_time() - c0
    finally:
        v.close()
    return _row(f"env/vector-{mode}-{num_envs}/{scenario}", scenario, "targets", mode, num_envs,
                steps, dt, cpu if mode == "sync" else None)


def bench_env(seconds: float = 2.0) -> list[dict[str, Any]]:
    """All env benchmarks: per scenario and action mode, then sync/async vector throughput."""
    rows = [
        env_steps_per_second(sc, mode, seconds)
        for sc in ("tiny", "testbed")
        for mode in ("targets", "sequential", "priority")
    ]
    rows += [vector_steps_per_second(m, seconds=seconds) for m in ("sync", "async")]
    return rows


def main() -> None:  # pragma: no cover - manual benchmark
    rows = bench_env()
    print("| benchmark | steps | steps/s (wall) | steps/s (CPU) |")
    print("|---|---:|---:|---:|")
    for r in rows:
        cpu = f"{r['cpu_steps_per_s']:,.0f}" if r["cpu_steps_per_s"] else "-"
        print(f"| {r['name']} | {r['steps']} | {r['steps_per_s']:,.0f} | {cpu} |")


if __name__ == "__main__":  # pragma: no cover
    main()
