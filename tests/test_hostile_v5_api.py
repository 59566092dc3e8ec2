"""Hostile-user pass over the Python API a researcher calls directly: the reclaim env, the
allocation env's ``reset(options=...)`` and seeds, the rollout loop (``aryl_gym.rollout``) and the
multi-objective view's ``scalarize``. Each test failed on the code before the fix it names."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import aryl_gym  # noqa: F401  (registers the envs)
from aryl_gym.envs.allocation import MAX_INVALID_STREAK, ArylEnv
from aryl_gym.envs.reclaim import ArylReclaimEnv
from aryl_gym.reclaim_snapshots import synthetic_snapshots
from aryl_gym.rollout import play, run_agent, run_agent_batch
from aryl_gym.scenario import make_episode
from tests.helpers import tiny_loan_scenario


def _invalid_pick(env: ArylReclaimEnv) -> int:
    """A slot the mask refuses (a server not on loan, or picked already)."""
    bad = np.flatnonzero(~env.action_masks())
    assert len(bad), "every slot allowed: no invalid pick to make"
    return int(bad[0])


# ----------------------------------------------------------------------------------------------
# the reclaim env
# ----------------------------------------------------------------------------------------------


def test_reclaim_env_invalid_picks_truncate_after_the_streak():
    """was: an invalid pick does not move the clock and the reclaim env had no streak rule, so an
    agent repeating one played forever (the allocation env and the two-agent view truncate)."""
    env = ArylReclaimEnv(scenario=tiny_loan_scenario())
    env.reset(seed=5)
    assert env.need > 0  # a reclaim is pending at the first step
    n, term, trunc = 0, False, False
    while not (term or trunc) and n <= MAX_INVALID_STREAK:
        _, _, term, trunc, info = env.step(_invalid_pick(env))
        n += 1
    assert n == MAX_INVALID_STREAK and trunc and not term
    assert info["invalid_streak"] == MAX_INVALID_STREAK and info["invalid_total"] == MAX_INVALID_STREAK
    assert info["episode_result"].truncated
    # one valid pick resets the streak
    env.reset(seed=5)
    for _ in range(MAX_INVALID_STREAK - 1):
        env.step(_invalid_pick(env))
    _, _, term, trunc, info = env.step(int(np.flatnonzero(env.action_masks())[0]))
    assert not trunc and "invalid_streak" not in info and env.invalid_streak == 0


def test_reclaim_env_snapshot_mode_invalid_picks_truncate_too():
    env = ArylReclaimEnv(snapshots=synthetic_snapshots(2, 4, 6, seed=1), max_servers=8)
    env.reset(options={"index": 0})
    pad = env.n_inf - 1  # a padding slot: always invalid
    n, term, trunc = 0, False, False
    while not (term or trunc) and n <= MAX_INVALID_STREAK:
        _, _, term, trunc, info = env.step(pad)
        n += 1
    assert n == MAX_INVALID_STREAK and trunc and not term
    assert info["invalid_streak"] == MAX_INVALID_STREAK and "episode_metrics" in info


def test_reclaim_env_streak_is_copied_and_leaves_valid_episodes_alone():
    """The rule counts only invalid picks: a random masked episode, its replay from the same
    seed and a deep copy / pickle made mid-episode give the same steps bit for bit, and the
    copies carry the streak (they truncate at the same step as the original)."""
    cfg = tiny_loan_scenario()

    def steps(env: ArylReclaimEnv, rng: np.random.Generator, n: int | None = None) -> list[Any]:
        out = []
        while n is None or len(out) < n:
            a = int(rng.choice(np.flatnonzero(env.action_masks())))
            obs, r, term, trunc, info = env.step(a)
            out.append((a, r, term, trunc, b"".join(v.tobytes() for v in obs.values())))
            if term or trunc:
                break
        return out

    env = ArylReclaimEnv(scenario=cfg, observation="v1")
    env.reset(seed=7)
    first = steps(env, np.random.default_rng(0))
    env.reset(seed=7)
    rng = np.random.default_rng(0)
    head = steps(env, rng, 6)
    twins = [copy.deepcopy(env), pickle.loads(pickle.dumps(env))]
    rest = steps(env, copy.deepcopy(rng))
    assert head + rest == first and len(first) > 10
    for twin in twins:
        assert steps(twin, copy.deepcopy(rng)) == rest
    # a streak begun before the copy ends the copy's episode at the same step
    env.reset(seed=7)
    for _ in range(MAX_INVALID_STREAK - 3):
        env.step(_invalid_pick(env))
    for twin in (env, copy.deepcopy(env), pickle.loads(pickle.dumps(env))):
        ends = [twin.step(_invalid_pick(twin))[3] for _ in range(3)]
        assert ends == [False, False, True]


@pytest.mark.parametrize("reward", ["", {}])
def test_reclaim_env_empty_reward_is_an_error(reward: Any):
    """was: ``reward or {defaults}``, so "" and {} gave the default weights without a word (the
    allocation env refuses both)."""
    with pytest.raises(ValueError):
        ArylReclaimEnv(scenario="tiny", reward=reward)
    with pytest.raises(ValueError):
        ArylEnv(scenario="tiny", reward=reward)


def test_reclaim_env_jobs_none_option_keeps_the_env_jobs():
    """was: ``options.get("jobs", self.fixed_jobs)``, so ``{"jobs": None}`` played a generated
    episode instead of the env's ``jobs=`` (the allocation env keeps them)."""
    jobs = make_episode("tiny", 3).jobs[:5]
    env = ArylReclaimEnv(scenario="tiny", jobs=jobs)
    env.reset(seed=0, options={"jobs": None})
    assert env.sim is not None and env.sim.n_jobs == 5
    alloc = ArylEnv(scenario="tiny", jobs=jobs)
    alloc.reset(seed=0, options={"jobs": None})
    assert alloc.sim.n_jobs == 5


# ----------------------------------------------------------------------------------------------
# the allocation env's reset options and seeds
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("options, match", [
    ({"trace_format": "pollux"}, "trace_format"),
    ({"trace_map": "map.yaml"}, "trace_map"),
    ({"trace_options": {"max_jobs": 2}}, "trace_options"),
    ({"trace": ""}, "trace file path"),
    ({"trace": 5, "trace_format": "csv"}, "trace file path"),
])
def test_reset_options_that_were_ignored(options: dict[str, Any], match: str):
    """was: a trace option without any trace was dropped and the episode came from the
    generator (the constructor refuses the same options), and ``trace=""`` played the generator."""
    env = ArylEnv(scenario="tiny", window=4)
    with pytest.raises(ValueError, match=match):
        env.reset(seed=0, options=options)


def _csv_trace(tmp_path: Path) -> tuple[str, str]:
    p = tmp_path / "mine.csv"
    p.write_text("submit,gpus,duration\n0,1,600\n30,2,1200\n90,4,300\n")
    m = tmp_path / "map.yaml"
    m.write_text("columns:\n  submit: submit\n  gpus: gpus\n  duration: duration\n")
    return str(p), str(m)


def test_reset_jobs_beside_a_trace_is_an_error(tmp_path: Path):
    """was: ``jobs`` beside ``trace`` (or a trace option) played the jobs and dropped the trace
    without a word."""
    trace, tmap = _csv_trace(tmp_path)
    jobs = make_episode("tiny", 3).jobs[:2]
    env = ArylEnv(scenario="tiny", window=4)
    with pytest.raises(ValueError, match="both jobs and trace"):
        env.reset(seed=0, options={"jobs": jobs, "trace": trace, "trace_format": "csv", "trace_map": tmap})
    with pytest.raises(ValueError, match="both jobs and trace_options"):
        env.reset(seed=0, options={"jobs": jobs, "trace_options": {"max_jobs": 1}})
    on_trace = ArylEnv(scenario="tiny", window=4, trace=trace, trace_format="csv", trace_map=tmap)
    on_trace.reset(seed=0, options={"trace_options": None})
    assert on_trace.sim.n_jobs == 3
    # what still works: options' trace keys on the env's trace, and jobs over the env's trace
    on_trace.reset(seed=0, options={"trace_options": {"max_jobs": 2}})
    assert on_trace.sim.n_jobs == 2
    on_trace.reset(seed=0, options={"jobs": jobs})
    assert on_trace.sim.n_jobs == 2


@pytest.mark.parametrize("env_id", ["aryl_gym/Aryl-v2", "aryl_gym/ArylReclaim-v2"])
@pytest.mark.parametrize("seed", [True, np.bool_(False)])
def test_bool_seed_is_an_error(env_id: str, seed: Any):
    """was: Gymnasium took ``seed=True`` as seed 1 (the vector env refuses bools)."""
    env = gym.make(env_id, scenario="tiny")
    with pytest.raises(ValueError, match="reset\\(seed=...\\)"):
        env.reset(seed=seed)
    env.reset(seed=np.int64(1))  # numpy integers stay fine


# ----------------------------------------------------------------------------------------------
# the rollout loop
# ----------------------------------------------------------------------------------------------


class _Returns:
    """An agent whose predict returns ``fn(obs)`` as it is (no (action, state) wrapping)."""

    def __init__(self, fn: Any):
        self.fn = fn

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> Any:
        return self.fn(observation)


def _seq_env(**kw: Any) -> ArylEnv:
    return ArylEnv(scenario="tiny", action_mode="sequential", window=4, **kw)


@pytest.mark.parametrize("out, what", [
    (np.array([1, 1]), "array of shape \\(2,\\)"),  # a bare action of two entries
    (8, "got 8"),  # a bare action
    ((8, None, None), "tuple of length 3"),
])
def test_predict_must_return_action_and_state(out: Any, what: str):
    """was: a bare two-entry action (targets mode, window 2) was unpacked as ``action, state``:
    the env got its first entry as the whole action, counted every step invalid and truncated
    the episode after 1,000 of them; a bare int or a 3-tuple failed in the unpacking."""
    env = ArylEnv(scenario="tiny", action_mode="targets", window=2)
    with pytest.raises(ValueError, match=f"_Returns.predict must return \\(action, state\\).*{what}"):
        play(_Returns(lambda o: out), env, seed=0, max_steps=5)


@pytest.mark.parametrize("seed", [1.7, "3", None, -1, True])
def test_run_agent_seed_must_be_an_integer(seed: Any):
    """was: ``int(seed)``, so 1.7 played seed 1 and "3" seed 3 without a word (None: a TypeError
    from int())."""
    env = _seq_env()
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        run_agent(_Returns(lambda o: (8, None)), env, seed)
    with pytest.raises(ValueError, match="seeds\\[1\\] must be an integer >= 0"):
        run_agent_batch(_Returns(lambda o: ([8, 8], None)), [_seq_env(), _seq_env()], [0, seed])


@pytest.mark.parametrize("max_steps", [0, -1, 1.5])
def test_play_max_steps_must_be_positive(max_steps: Any):
    """was: max_steps=0 (or -1) still played one step."""
    with pytest.raises(ValueError, match="max_steps must be an integer >= 1"):
        play(_Returns(lambda o: (8, None)), _seq_env(), seed=0, max_steps=max_steps)


def test_run_agent_cut_by_max_steps_says_so():
    """was: "the env's final info carries no EpisodeResult ...; the env must put it in the last
    step's info", blaming the env for an episode that had not ended."""
    with pytest.raises(RuntimeError, match="max_steps=3 steps, before the episode ended"):
        run_agent(_Returns(lambda o: (8, None)), _seq_env(), 0, max_steps=3)


class _Batch:
    """Answers a batch of ``n`` observations with ``n + extra`` commits (or a scalar), and
    optionally a recurrent state."""

    def __init__(self, extra: int = 0, scalar: bool = False, state: Any = None):
        self.extra, self.scalar, self.state = extra, scalar, state

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> Any:
        n = len(observation["jobs"])
        return (8 if self.scalar else np.full(n + self.extra, 8)), self.state


@pytest.mark.parametrize("agent, match", [
    (_Batch(extra=-1), "batch of 2 observations and returned 1 actions"),
    (_Batch(extra=1), "batch of 2 observations and returned 3 actions"),
    (_Batch(scalar=True), "batch of 2 observations and returned 8"),
    (_Batch(state=np.zeros(3)), "recurrent state"),
])
def test_run_agent_batch_refuses_answers_it_would_misread(agent: Any, match: str):
    """was: zip() paired actions with envs, so one action too few left the last episode
    unplayed with a None result (returned as if fine), too many were ignored, a scalar was a
    TypeError ("'int' object is not iterable"), and a recurrent state was dropped every step."""
    with pytest.raises(ValueError, match=match):
        run_agent_batch(agent, [_seq_env(), _seq_env()], [0, 1])


def test_run_agent_batch_matches_run_agent_and_checks_seeds():
    """The checks change no result (a deterministic masked agent through both loops, numpy
    seeds included), and a float seed is refused (was: int(0.5) played seed 0)."""

    class First:
        def predict(self, observation: Any, state: Any = None, episode_start: Any = None,
                    deterministic: bool = True, action_masks: Any = None) -> Any:
            m = np.asarray(action_masks, dtype=bool)
            if m.ndim == 1:
                return int(np.flatnonzero(m)[0]), state
            return np.array([int(np.flatnonzero(r)[0]) for r in m]), state

    batch = run_agent_batch(First(), [_seq_env(), _seq_env()], [np.int64(0), 1])
    for (res, ret, n), seed in zip(batch, [0, 1]):
        res1, ret1, n1 = run_agent(First(), _seq_env(), seed)
        assert (ret, n) == (ret1, n1) and res.to_dict() == res1.to_dict()
    with pytest.raises(ValueError, match="seeds\\[0\\] must be an integer"):
        run_agent_batch(First(), [_seq_env()], [0.5])


# ----------------------------------------------------------------------------------------------
# the multi-objective view
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("vector, weights", [
    (np.zeros(2), None),  # a vector of two entries for three objectives
    (np.ones(4), None),
    (np.ones(3), np.ones(2)),
    (np.ones((1, 3)), None),
])
def test_scalarize_refuses_another_length(vector: Any, weights: Any):
    """was: zip() summed the entries that paired up: a wrong-length vector gave a silent sum
    over its first entries."""
    env = gym.make("aryl_gym/ArylMO-v2", scenario="tiny", action_mode="sequential").unwrapped
    assert env.scalarize(np.array([2.0, 3.0, 5.0]), np.array([1.0, 0.5, 0.0])) == 3.5
    with pytest.raises(ValueError, match="one entry per objective"):
        env.scalarize(vector, weights)
