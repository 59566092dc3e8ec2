"""Training throughput benchmark: env steps per second of MaskablePPO end to end.

``bench_train()`` trains MaskablePPO on ``testbed`` (``sequential`` mode, the ``testbed``
section of ``configs/algos/maskable_ppo.yaml``: 128-128 MLP, batch 512, 4 epochs) for a fixed
number of environment steps with its periodic evaluation callback (held-out seeds, references
computed once before the clock starts), and reports steps per second of wall and of this
process's CPU time (a busy machine inflates wall time, not CPU time). Variants:

* ``sb3``: SB3's ``DummyVecEnv``, sb3-contrib's ``MultiInputPolicy``, evaluation through
  ``model.predict`` (the setup before the fast path), 2 envs;
* ``fast``: :class:`aryl_gym.train.fast.ArylVecEnv`, ``FastMaskableMultiInputPolicy``, the direct
  masked argmax in evaluation, 2 envs;
* ``fast-8``: the same with 8 envs (``n_steps`` 512 each, the same 4,096-step rollouts), so the
  policy's forward pass serves 8 envs at a time;
* ``fast-8-bg``: ``fast-8`` with the evaluations in a worker process
  (:mod:`aryl_gym.train.async_eval`; its CPU time is not in ``cpu_steps_per_s``);
* ``v1``: the RL phase of the shipped ``ppo-v1-kickstart`` recipe (``configs/algos/maskable_ppo_set.yaml``,
  section ``testbed``: set policy, observation v1, window 32 with preemption, trace pairing with
  the trace-mean baseline, worlds, 8 envs, background evaluation) without its teacher, from the
  shipped ``ppo-v1-kickstart`` weights, without the critic warm-up (the steady state of the RL phase);
* ``v1-scratch``: the shipped ``ppo-v1`` recipe (``configs/algos/maskable_ppo_scratch.yaml``,
  section ``testbed``: PPO from scratch with preemption under the flap damping shield, early ends
  charged, 8 envs, background evaluation), from the shipped ``ppo-v1`` weights (the argmax of
  random weights would make the timed evaluations stall for hours of simulated time);
* ``v1-teacher``: ``v1`` with the ``aryl-preempt`` teacher in the loop as configured (labels on
  every step, distillation after every update; no demonstrations mixed in, since the benchmark
  records none, so a little cheaper than the real run).

Every variant evaluates every ``EVAL_FREQ`` steps on ``EVAL_SEEDS`` against Aryl, so the figures
are comparable; the ``v1`` variants evaluate on their config's evaluation scenario (load 1.1).

Run: ``python -m aryl_gym.benchmarks.train`` or ``aryl-gym bench`` (section ``train``).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

STEPS = 40_960
EVAL_FREQ = 20_000  # the testbed section's evaluation: every 20,000 steps on 5 seeds
EVAL_SEEDS = (1000, 1001, 1002, 1003, 1004)


VARIANTS = ("sb3", "fast", "fast-8", "fast-8-bg", "v1", "v1-teacher", "v1-scratch")
DEFAULT_VARIANTS = ("sb3", "fast-8-bg", "v1-scratch", "v1", "v1-teacher")  # what ``aryl-gym bench`` runs


def _config(variant: str) -> Any:
    # config imports pydantic: only when a config is validated
    from aryl_gym.train.config import load_train_config

    if variant not in VARIANTS:
        raise ValueError(f"unknown training benchmark variant {variant!r}; choose from {', '.join(VARIANTS)}")
    over: dict[str, Any] = {"total_timesteps": STEPS, "checkpoint_freq": 0}
    if variant == "v1-scratch":
        return load_train_config("maskable_ppo_scratch", "testbed", over)
    if variant.startswith("v1"):
        # the RL phase in steady state: no warm start to record, no critic warm-up (a one-off
        # phase with the actor frozen)
        cfg = load_train_config("maskable_ppo_set", "testbed", over).replace(critic_warmup_steps=0)
        teacher = dataclasses.replace(cfg.teacher, demo_share=0.0)
        if variant == "v1":
            teacher = dataclasses.replace(teacher, policy=None)
        return cfg.replace(teacher=teacher)
    cfg = load_train_config("maskable_ppo", "testbed", over)
    if variant == "sb3":
        return cfg
    hp = dict(cfg.hyperparams)
    n_envs = 8 if variant.startswith("fast-8") else 2
    hp["n_steps"] = 2048 * 2 // n_envs
    return cfg.replace(vec_env="aryl", policy="FastMaskableMultiInputPolicy", n_envs=n_envs,
                       hyperparams=hp)


def train_steps_per_second(variant: str, steps: int = STEPS) -> dict[str, Any]:
    """Train ``steps`` env steps of ``variant`` with evaluation every ``EVAL_FREQ`` steps."""
    # torch (the train extra): imported when used
    import torch

    # stable-baselines3 (the train extra, torch): imported when used
    from stable_baselines3.common.callbacks import CallbackList

    # callbacks imports pydantic: only when a config is validated
    from aryl_gym.train.callbacks import ArylEvalCallback, ClusterMetricsCallback

    # runner imports pydantic: only when a config is validated
    from aryl_gym.train.runner import EnvFactory, build_model, make_vec_env

    torch.set_num_threads(1)
    cfg = _config(variant).replace(total_timesteps=steps)
    venv = make_vec_env(cfg)
    model = build_model(cfg, venv)
    if variant.startswith("v1"):
        # the RL phase starts from a warm start; an untrained policy's evaluations (deterministic
        # argmax of random weights) run for hours of simulated stalls and would be what is timed
        from aryl_gym.agents.learned import PRETRAINED_DIR

        weights = "ppo-v1.zip" if variant == "v1-scratch" else "ppo-v1-kickstart.zip"
        model.set_parameters(str(PRETRAINED_DIR / weights), exact_match=False, device="cpu")
    cls = ArylEvalCallback
    if variant.endswith("-bg") or variant.startswith("v1"):
        # async_eval imports pydantic: only when a config is validated
        from aryl_gym.train.async_eval import AsyncArylEvalCallback

        cls = AsyncArylEvalCallback
    ev = cls(EnvFactory(cfg, evaluation=True), cfg.scenario, EVAL_SEEDS, ("aryl",), EVAL_FREQ, fast=variant != "sb3")
    ev.init_callback(model)  # the references run once, before the clock
    t0, c0 = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=steps, callback=CallbackList([ClusterMetricsCallback(), ev]))
    ev.finish()  # the last background evaluation counts too
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    venv.close()
    n = int(model.num_timesteps)
    return {
        "variant": variant,
        "n_envs": cfg.n_envs,
        "steps": n,
        "evaluations": len(ev.history),
        "wall_s": round(wall, 1),
        "steps_per_s": round(n / wall),
        "cpu_steps_per_s": round(n / cpu) if cpu > 0 else None,
    }


def bench_train(variants: tuple[str, ...] = DEFAULT_VARIANTS) -> list[dict[str, Any]]:
    return [train_steps_per_second(v) for v in variants]


if __name__ == "__main__":  # pragma: no cover
    import sys

    rows = bench_train(tuple(sys.argv[1:]) or DEFAULT_VARIANTS)
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")
