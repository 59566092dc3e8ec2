"""Hostile pass on "the same seed gives the same episode, bit for bit" (helper-48).

Each test digests whole episodes: every field of the native ``EpisodeResult`` (series included,
timings left out), and through ``aryl_gym/Aryl-v2`` every observation, reward, flag and the
numbers of every ``info`` under seeded random masked actions. The episodes are compared

* across processes with other ``PYTHONHASHSEED`` values and thread counts (string hashing and
  BLAS/OpenMP threads must not reach an episode);
* within a process: the same seed after other episodes, a policy object reused across episodes,
  and with observers attached (the invariant checker, ``render``, extra ``action_masks`` calls);
* between the vector envs (batched and async) and single envs of the same seeds, through
  autoreset.

Only one thing broke: :func:`aryl_gym.provenance.config_hash` (the key of cached episodes) wrote
a set in the scenario (``trace_options={"vc": {...}}``, YAML ``!!set``) in string-hash order, so
a scenario's hash changed from process to process and its cached episodes were never found again
(``test_config_hash_*``). The episodes themselves were the same under every probe. A set in an
agent's env kwargs still hashes in its own order: the leaderboard stores those kwargs as that
text and rehashes it (``test_env_kwargs_hash_matches_the_leaderboard_text``).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from aryl_gym.agents import make_policy

import aryl_gym  # noqa: F401  (registers the envs)
from aryl_gym.config import load_scenario
from aryl_gym.metrics import EpisodeResult
from aryl_gym.provenance import _sets_sorted, _stable_str, config_hash, scenario_fingerprint
from aryl_gym.scenario import make_episode
from aryl_gym.sim.invariants import check

ROOT = Path(__file__).resolve().parents[1]
ID = "aryl_gym/Aryl-v2"
MODES = ("targets", "sequential", "priority")
TIMING = ("wall_s", "decision_ms_mean", "decision_ms_max")
#: fast reference policies (the Pollux family takes seconds per tiny episode)
POLICIES = ("aryl", "aryl+tuned", "aryl-hetero", "aryl-preempt", "sjf", "fifo", "baseline", "afs",
            "afs-loan", "gandiva", "random")
#: eight virtual cluster ids: two processes with other hash seeds list such a set in the same
#: order with odds of about 1 in 40,000
VCS = frozenset({"6214e9", "103959", "11cb48", "0e4a51", "2869ce", "ee9e8c", "b436b2", "e13805"})


def _canon(x: Any) -> str:
    """A canonical text of an observation, reward or info (floats in hex, arrays by digest)."""
    if isinstance(x, EpisodeResult):
        d = x.to_dict(series=True)
        for k in TIMING:
            d.pop(k, None)
        return "R" + json.dumps(d, sort_keys=True, default=str)
    if isinstance(x, dict):
        return "{" + ",".join(f"{k!r}:{_canon(x[k])}" for k in sorted(x, key=str)) + "}"
    if isinstance(x, (list, tuple)):
        return "[" + ",".join(_canon(v) for v in x) + "]"
    if isinstance(x, np.ndarray):
        return f"A{x.dtype}{x.shape}" + hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()
    if isinstance(x, (float, np.floating)):
        return float(x).hex()
    if isinstance(x, (np.integer, np.bool_)):
        return repr(x.item())
    if isinstance(x, (bool, int, str, type(None))):
        return repr(x)
    raise TypeError(f"no canonical form for {type(x).__name__}")  # the digest would miss it


def _result_digest(res: EpisodeResult) -> str:
    return hashlib.sha256(_canon(res).encode()).hexdigest()


def _native(policy: Any, seed: int, scenario: str = "tiny", **run: Any) -> str:
    pol = make_policy(policy) if isinstance(policy, str) else policy
    return _result_digest(make_episode(scenario, seed).simulator().run(pol, **run))


def _random_action(space: gym.Space, mask: np.ndarray, rng: np.random.Generator) -> Any:
    if hasattr(space, "nvec"):  # MultiDiscrete: the mask is the per-slot masks concatenated
        out, off = [], 0
        for n in np.asarray(space.nvec).ravel():
            m = mask[off: off + int(n)]
            out.append(int(rng.choice(np.flatnonzero(m) if m.any() else np.arange(int(n)))))
            off += int(n)
        return np.asarray(out, dtype=np.int64).reshape(np.asarray(space.nvec).shape)
    ok = np.flatnonzero(mask)
    return int(rng.choice(ok)) if ok.size else 0


def _env_episode(mode: str, seed: int, env: Any = None, render: bool = False,
                 masks_twice: bool = False) -> tuple[str, int]:
    """(digest, steps) of one env episode from ``reset(seed=seed)`` under seeded random masked
    actions; every step's observation, reward, flags and info go into the digest."""
    env = env or gym.make(ID, scenario="tiny", action_mode=mode, render_mode="ansi" if render else None)
    rng = np.random.default_rng(1000 + seed)
    h = hashlib.sha256()
    obs, info = env.reset(seed=seed)
    h.update(_canon([obs, info]).encode())
    steps = 0
    while True:
        if masks_twice:
            env.unwrapped.action_masks()
        if render:
            env.render()
        action = _random_action(env.action_space, env.unwrapped.action_masks(), rng)
        obs, reward, terminated, truncated, info = env.step(action)
        h.update(_canon([obs, reward, terminated, truncated, info]).encode())
        steps += 1
        if terminated or truncated:
            return h.hexdigest(), steps


def _set_config_hashes() -> list[str]:
    cfg = load_scenario("philly-6214e9")
    opts = dict(cfg.workload.trace_options)
    return [
        config_hash(cfg.replace(workload={"trace_options": {**opts, "vc": set(VCS)}})),
        config_hash(cfg.replace(workload={"trace_options": {**opts, "vc": [VCS, ("x", VCS)]}})),
    ]


def digests() -> dict[str, Any]:
    """Everything the cross-process test compares (run in this process and in children)."""
    out: dict[str, Any] = {f"native {p}": _native(p, 0) for p in POLICIES}
    out["native aryl testbed"] = _native("aryl", 1, "testbed")
    out.update({f"env {m}": _env_episode(m, 0) for m in MODES})
    out["config hashes"] = _set_config_hashes()
    return out


def _child(hash_seed: str, threads: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "OMP_NUM_THREADS": threads,
           "OPENBLAS_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    code = "import json, tests.test_determinism_v2 as t; print(json.dumps(t.digests()))"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # three processes (2 s); the in-process set-order test below covers the fix
def test_episodes_do_not_depend_on_hash_seed_or_threads():
    """The same episodes (native and through the env) and the same configuration hashes in this
    process (its own hash seed) and in two children with hash seeds 0 and 2 (which order the
    philly vc set differently), one of them on two BLAS/OpenMP threads. Before the fix the
    configuration hash of a scenario holding a set differed."""
    here = digests()
    for hash_seed, threads in (("0", "1"), ("2", "2")):
        child = _child(hash_seed, threads)
        want = json.loads(json.dumps(here))
        differ = sorted(k for k in want if child.get(k) != want[k])
        assert not differ, f"PYTHONHASHSEED={hash_seed} threads={threads}: {differ} differ"


def test_config_hash_ignores_set_order_in_process():
    """Two equal sets whose iteration orders differ (one built through a larger table) give one
    hash; before the fix ``json.dumps(default=str)`` wrote each in its own order."""
    a = set(VCS)
    b = None
    for extra in (8, 32, 128, 512):
        c = set(VCS) | {f"filler{i}" for i in range(extra)}
        c -= {f"filler{i}" for i in range(extra)}
        if list(c) != list(a):
            b = c
            break
    assert b is not None and a == b and list(a) != list(b)
    cfg = load_scenario("philly-6214e9")
    opts = dict(cfg.workload.trace_options)
    ha, hb = (config_hash(cfg.replace(workload={"trace_options": {**opts, "vc": s}})) for s in (a, b))
    assert ha == hb


def test_env_kwargs_hash_matches_the_leaderboard_text():
    """A leaderboard row stores the agent's env kwargs as ``json.dumps(default=str)`` text and
    its check rehashes what it reads back: that must give the recorded hash, a set included (so
    the env kwargs keep ``default=str`` until the row's text is written sorted too)."""
    cfg = load_scenario("testbed")
    kw = {"families": set(VCS), "window": 8}
    stored = json.loads(json.dumps(kw, sort_keys=True, default=str))
    assert config_hash(cfg, "m:f", ID, kw) == config_hash(cfg, "m:f", ID, stored)


def test_stable_str_keeps_every_hash_that_was_already_stable():
    """The text is ``str(o)`` for anything but a set, and for a set whose order is sorted (any
    one-element or empty set), so no configuration hash that was reproducible moves."""
    for o in ({"6214e9"}, set(), frozenset(), frozenset({"a"}), {3}, {("a", 1)}, "x", 1.5, None):
        assert _stable_str(o) == str(o)
    assert _stable_str({"b", "a", "c"}) == "{'a', 'b', 'c'}"
    assert _stable_str(frozenset({"b", "a"})) == "frozenset({'a', 'b'})"
    assert _sets_sorted({"a": [({"c", "b"}, 1)], "d": 2}) == {"a": [["{'b', 'c'}", 1]], "d": 2}
    # the shipped scenarios (no sets) hash as they did with json.dumps(default=str)
    for name in ("testbed", "philly-6214e9", "pollux-w6"):
        cfg = load_scenario(name)
        text = json.dumps({"scenario": scenario_fingerprint(cfg)}, sort_keys=True, default=str)
        assert config_hash(cfg) == hashlib.sha256(text.encode()).hexdigest()[:16], name


def test_policy_object_reused_across_episodes_repeats_each_seed():
    """A seed's episode is the same fresh, and after the same policy object played other seeds
    (policies keep no state from one episode to the next)."""
    for name in POLICIES:
        fresh = _native(name, 1)
        pol = make_policy(name)
        played = [_native(pol, s) for s in (0, 1, 2, 1)]
        assert played[1] == played[3] == fresh, name


def test_env_seed_after_other_episodes_and_with_observers():
    """``reset(seed=s)`` gives the same episode on a fresh env and on one that played other
    seeds (one cut short); ``render()``, extra ``action_masks()`` calls and the native run's
    invariant checker do not change an episode."""
    for mode in MODES:
        fresh = _env_episode(mode, 3)
        env = gym.make(ID, scenario="tiny", action_mode=mode)
        _env_episode(mode, 1, env=env)
        env.reset(seed=2)
        for _ in range(17):
            env.step(_random_action(env.action_space, env.unwrapped.action_masks(), np.random.default_rng(5)))
        assert _env_episode(mode, 3, env=env) == fresh, mode
        assert _env_episode(mode, 3, render=True) == fresh, mode
        assert _env_episode(mode, 3, masks_twice=True) == fresh, mode
    for name in ("aryl", "afs-loan", "random"):
        assert _native(name, 2, on_round=check) == _native(name, 2), name


INFO_KEYS = ("time", "queued", "running", "done", "invalid_total", "elapsed", "decision_point")


def _single_rows(i: int, seed: int, steps: int, autoreset: str) -> tuple[list[str], int]:
    """Env ``i`` of a vector env played as a single env: ``reset(seed=seed + i)``, then seedless
    resets as the vector env's autoreset does them. Returns one text per step and the number of
    episodes that ended."""
    env = gym.make(ID, scenario="tiny", action_mode="targets")
    rng = np.random.default_rng(100 + i)
    obs, info = env.reset(seed=seed + i)
    rows = [_canon([obs, 0.0, False, False, {k: info.get(k) for k in INFO_KEYS}])]
    pending, ends = False, 0
    for _ in range(steps):
        action = _random_action(env.action_space, env.unwrapped.action_masks(), rng)
        if pending:  # next_step: this step resets, its action is ignored
            (obs, info), reward, term, trunc, pending = env.reset(), 0.0, False, False, False
        else:
            obs, reward, term, trunc, info = env.step(action)
            if term or trunc:
                ends += 1
                if autoreset == "same_step":
                    obs, info = env.reset()
                else:
                    pending = True
        rows.append(_canon([obs, float(reward), bool(term), bool(trunc), {k: info.get(k) for k in INFO_KEYS}]))
    return rows, ends


def _vector_rows(venv: Any, n: int, seed: int, steps: int) -> list[list[str]]:
    rngs = [np.random.default_rng(100 + i) for i in range(n)]
    rows: list[list[str]] = [[] for _ in range(n)]

    def record(obs, reward, term, trunc, info):
        for i in range(n):
            inf = {k: (info[k][i].item() if info[f"_{k}"][i] else None) if k in info else None
                   for k in INFO_KEYS}
            rows[i].append(_canon([{k: v[i] for k, v in obs.items()}, float(reward[i]), bool(term[i]),
                                   bool(trunc[i]), inf]))

    obs, info = venv.reset(seed=seed)
    record(obs, np.zeros(n), np.zeros(n, bool), np.zeros(n, bool), info)
    for _ in range(steps):
        masks = venv.action_masks()
        actions = np.stack([_random_action(venv.single_action_space, masks[i], rngs[i]) for i in range(n)])
        record(*venv.step(actions))
    venv.close()
    return rows


@pytest.mark.slow  # 2 s each; tests/test_vector.py checks make_vec against SyncVectorEnv in the fast tier
@pytest.mark.parametrize("autoreset", ["next_step", "same_step"])
def test_vector_envs_play_the_single_envs_episodes_through_autoreset(autoreset):
    """Env ``i`` of the batched and of the async vector env (2 workers) plays, step for step,
    the single env seeded ``seed + i`` (observations, rewards, flags and the info numbers),
    through at least one autoreset each."""
    n, seed, steps = 3, 20, 460
    ref = [_single_rows(i, seed, steps, autoreset) for i in range(n)]
    assert all(ends >= 1 for _, ends in ref)
    kw = {"scenario": "tiny", "action_mode": "targets", "autoreset_mode": autoreset}
    for venv in (gym.make_vec(ID, num_envs=n, **kw), gym.make_vec(ID, num_envs=n, workers=2, **kw)):
        name = type(venv).__name__
        rows = _vector_rows(venv, n, seed, steps)
        for i in range(n):
            first = next((s for s, (a, b) in enumerate(zip(ref[i][0], rows[i])) if a != b), None)
            assert first is None and len(rows[i]) == len(ref[i][0]), f"{name} env {i}: step {first}"


@pytest.mark.slow
def test_pollux_repeats_reused_and_without_numba():
    """Pollux (its genetic search draws from the episode's generator, its fits are cached per
    episode) repeats a seed with a reused policy object, and the pure-numpy generation loop
    (``ARYL_GYM_NO_NUMBA=1``, in a child) gives the same episode as the compiled one."""
    pol = make_policy("pollux")
    played = [_native(pol, s) for s in (1, 0, 1)]
    assert played[0] == played[2] == _native("pollux", 1)
    code = ("import tests.test_determinism_v2 as t; print(t._native('pollux', 1))")
    env = {**os.environ, "ARYL_GYM_NO_NUMBA": "1", "PYTHONHASHSEED": "7", "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == played[0]
