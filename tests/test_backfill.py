"""Backfill of queued jobs outside the window (``ArylEnv(backfill=True)``): a hand-computed
commit, the agent's own targets never cut, determinism, and bad values."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from aryl_gym.sim.jobs import JobState
from tests.helpers import job, small_config

LONG = 36_000.0  # long enough that nothing finishes before the next decision point


def _hand_env(backfill: bool, **kw):
    """One training server of 4 V100 (no loaning), window K = 1 in submit order: job 0 is the
    window, jobs 1, 2, 3 are queued outside it."""
    jobs = [
        job(0, work=LONG, g=1, w=2),  # the window's job: 2 one-GPU workers
        job(1, work=LONG, g=1, w=4, w_min=1, elastic=True),  # requests its base demand, 1
        job(2, work=LONG, g=2, w=1),  # 2 GPUs: no room once 0 and 1 run
        job(3, work=LONG, g=1, w=1),
    ]
    cfg = small_config(train_servers=1, train_gpus=4, inf_servers=1, inf_gpus=4)
    return gym.make("aryl_gym/Aryl-v1", scenario=cfg, jobs=jobs, window=1, action_mode="sequential",
                    uses_loaning=False, backfill=backfill, **kw)


@pytest.mark.parametrize("backfill", [False, True])
def test_commit_by_hand(backfill):
    """Grant job 0 (2 GPUs) and commit. Without backfill nothing else starts. With it the
    outside jobs start in window order at w_req where they fit: job 1 at 1 worker (1 GPU
    left), job 2 needs 2 GPUs (skipped), job 3 takes the last GPU."""
    env = _hand_env(backfill)
    u = env.unwrapped
    env.reset(seed=0)
    assert list(u.window) == [0] and list(u._q_out) == [1, 2, 3]
    k = u.k
    assert u.action_masks()[0]  # the grant of job 0
    env.step(0)
    _, _, term, trunc, info = env.step(2 * k)  # commit
    assert not (term or trunc) and info["unplaced"] == 0
    workers = u.sim.workers[:4].tolist()
    if backfill:
        assert workers == [2, 1, 0, 1]
        assert u.backfilled == 2
        assert u.sim.state[2] == int(JobState.QUEUED)
    else:
        assert workers == [2, 0, 0, 0]
        assert u.backfilled == 0
    env.close()


def _random_episode(backfill: bool, seed: int, max_steps: int = 20_000):
    """A uniformly random masked agent (preemption allowed) on the tiny scenario; returns the
    per-commit unplaced counts, the last info and a fingerprint of every step."""
    env = gym.make("aryl_gym/Aryl-v1", scenario="tiny", action_mode="sequential", window=4,
                   allow_preempt=True, backfill=backfill)
    u = env.unwrapped
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    unplaced, trail = [], []
    for _ in range(max_steps):
        a = int(rng.choice(np.flatnonzero(u.action_masks())))
        obs, r, term, trunc, info = env.step(a)
        if "unplaced" in info:
            unplaced.append(info["unplaced"])
        trail.append((a, r, info["time"], u.sim.workers.tobytes()))
        if term or trunc:
            break
    else:
        pytest.fail("the episode did not end")
    env.close()
    return unplaced, info, trail


def test_a_backfill_that_would_cut_the_agent_is_shed(monkeypatch):
    """The engine places a round's growth largest worker first, so jobs that fit one by one after
    the agent's targets may not fit all together: the merged decision is dry-run and the last
    added job shed until it places in full. Here the dry run is made to refuse any merged
    decision holding job 3: job 3 is shed, job 1 still starts, the agent's job 0 is untouched."""
    import aryl_gym.envs.allocation as allocation

    real = allocation.plan

    class Short:
        fully_placed = False

    def plan(sim, decision, opts, *a, **kw):
        if 3 in decision.targets:
            return Short()
        return real(sim, decision, opts, *a, **kw)

    env = _hand_env(True)
    u = env.unwrapped
    env.reset(seed=0)
    monkeypatch.setattr(allocation, "plan", plan)
    env.step(0)
    _, _, _, _, info = env.step(2 * u.k)
    assert info["unplaced"] == 0
    assert u.sim.workers[:4].tolist() == [2, 1, 0, 0] and u.backfilled == 1
    env.close()


def test_flap_damping_counts_backfilled_starts_as_grants():
    """A backfilled start is on the agent's behalf: the agent's next release of that job is a
    reversal (else an agent preempting what backfill restarts would cycle unseen)."""
    env = _hand_env(True, flap_damping=True, allow_preempt=True)
    u = env.unwrapped
    env.reset(seed=0)
    env.step(0)
    env.step(2 * u.k)
    assert u._damping.last_dir[:4].tolist() == [1, 1, 0, 1]
    env.close()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_agent_targets_never_cut_and_backfill_acts(seed):
    """Masks promise that every decision of the agent places in full; backfill adds jobs only
    while that still holds (the engine places larger workers first, so this is checked)."""
    unplaced, info, _ = _random_episode(True, seed)
    assert unplaced and max(unplaced) == 0
    assert info["backfilled"] > 0
    assert info["episode_result"].jobs_unfinished == 0


def test_backfill_changes_only_what_it_should_and_is_deterministic():
    """The same seed and actions give the same episode bit for bit; backfill off leaves no
    ``backfilled`` in the final info."""
    a = _random_episode(True, 5)
    b = _random_episode(True, 5)
    assert a[2] == b[2]
    off = _random_episode(False, 5)
    assert "backfilled" not in off[1]
    assert off[2] != a[2]


@pytest.mark.parametrize("bad", ["yes", 2, None, 0.5])
def test_bad_values_are_errors(bad):
    with pytest.raises(ValueError, match="backfill must be True or False"):
        gym.make("aryl_gym/Aryl-v1", scenario="tiny", backfill=bad)
