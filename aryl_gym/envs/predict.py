"""Reference policies acting *through* the env: SB3-style ``predict`` adapters (SPEC 3, 6).

:class:`HeuristicPredictor` binds any policy of :func:`aryl_gym.agents.make_policy` to one
:class:`~aryl_gym.envs.allocation.ArylEnv` and answers ``predict(obs, state, episode_start,
deterministic)`` like a stable-baselines3 model, so ``evaluate_policy``, demonstrations and
leaderboards treat heuristics and learned agents alike.

**It does not read the observation.** The heuristic decides on the simulator's *full state*
(``env.unwrapped.sim.view``) exactly as in a native run; the adapter then encodes that decision in
the env's action mode:

* ``sequential`` (exact): the decision's effect is computed with a dry run of the engine
  (:meth:`aryl_gym.sim.placement.PlacementPlan.changes`), then emitted as releases (one worker per
  sub-step), grants in the engine's placement order (GPUs per worker descending, then the
  decision's order, then id), and a commit. With the env configured like the policy
  (:func:`policy_env_kwargs`) and a window holding every active job it touches, the episode is
  the native one: same :class:`~aryl_gym.metrics.EpisodeResult` (tests check this for fifo, sjf
  and aryl on ``tiny`` and ``testbed``). Jobs outside the window are skipped (counted in
  ``skipped``).
* ``targets``: each window slot gets the decision's effective worker count (current count for
  running jobs it does not change); masked levels fall back to the current count.
* ``priority``: jobs the decision starts get descending positive scores, others -1.

Works with a single env (observations with or without a batch dimension of 1).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from aryl_gym.agents import make_policy
from aryl_gym.envs.options import resolve_reclaim
from aryl_gym.sim.engine import default_reclaim
from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.placement import plan


def policy_env_kwargs(name: str) -> dict[str, Any]:
    """Env keyword arguments that make the env's simulator settings those of policy ``name``
    (loaning, placement options, reclaim rule), as needed for an exact replay."""

    pol = make_policy(name)
    return {
        "uses_loaning": bool(pol.uses_loaning),
        "placement": pol.placement,
        "reclaim": pol.reclaim,
    }


class HeuristicPredictor:
    """An SB3-style policy that runs reference policy ``policy`` through ``env``.

    Args:
        policy: a registry name or a policy object.
        env: the env (any wrapper around an ``ArylEnv``); the adapter reads its simulator.
        use_policy_reclaim: make the env's reclaim rule the policy's own ``reclaim`` (the
            policy decides what to return, as in a native run).
    """

    def __init__(self, policy: Any, env: Any, use_policy_reclaim: bool = True):
        self.policy = make_policy(policy) if isinstance(policy, str) else policy
        if not callable(getattr(self.policy, "decide", None)):
            # was: an AttributeError ('NoneType' object has no attribute 'reclaim')
            raise ValueError(f"policy must be a policy name (aryl-gym policies) or a policy object, got {policy!r}")
        self.env = getattr(env, "unwrapped", env)
        if not callable(getattr(self.env, "set_reclaim", None)):
            # was: an AttributeError ('ArylParallelEnv' object has no attribute 'set_reclaim')
            hint = " (the two-agent view: pass env.alloc, its allocation agent's env)" if hasattr(self.env, "alloc") else ""
            raise ValueError(f"HeuristicPredictor acts through an allocation env (Aryl-v2, ArylMO-v2), "
                             f"got {type(self.env).__name__}{hint}")
        if use_policy_reclaim:
            self.env.set_reclaim(self.policy.reclaim)
        self._episode = -1
        self._point = -1
        self._queue: deque[int] = deque()
        self.skipped = 0  # decision parts that the action space could not express

    # ------------------------------------------------------------------------------------------
    def _sync(self) -> None:
        env = self.env
        if env.sim is None:  # was: an AttributeError ('NoneType' object has no attribute 'seed')
            raise RuntimeError("call env.reset() before predict()")
        if env.episode_count != self._episode:
            self._episode = env.episode_count
            self._point = -1
            self.policy.reset(env.sim.seed)

    def _decide(self) -> tuple[dict[int, int], list[int]]:
        """The policy's decision at this decision point as (effective targets, order)."""
        sim = self.env.sim
        dec = self.policy.decide(sim.view)
        eff, _ = plan(sim, dec, self.env.placement).changes()
        return eff, list(dec.order or [])

    def _plan_sequential(self) -> None:
        env = self.env
        sim = env.sim
        eff, order = self._decide()
        slot = {int(j): i for i, j in enumerate(env.window)}
        k = env.k
        q: deque[int] = deque()
        for j in sorted(eff):
            t, cur = eff[j], int(sim.workers[j])
            if t < cur:
                if j not in slot:
                    self.skipped += 1
                    continue
                steps = cur - t if t >= int(sim.w_min[j]) else cur - int(sim.w_min[j]) + 1
                q.extend([k + slot[j]] * steps)
        prio = {int(j): i for i, j in enumerate(order)}
        grow = [j for j in eff if eff[j] > int(sim.workers[j])]
        grow.sort(key=lambda j: (-int(sim.g[j]), prio.get(j, len(prio)), j))
        for j in grow:
            if j not in slot:
                self.skipped += 1
                continue
            t, cur = eff[j], int(sim.workers[j])
            if sim.state[j] == JobState.QUEUED:
                n = 1 + t - int(sim.w_min[j])
            else:
                n = t - cur
            q.extend([slot[j]] * n)
        q.append(env.codec.commit)
        self._queue = q

    def _act_sequential(self) -> int:
        env = self.env
        if env.decision_point != self._point or not self._queue:
            self._point = env.decision_point
            self._plan_sequential()
        mask = env.action_masks()
        while self._queue:
            a = self._queue.popleft()
            if mask[a]:
                return a
            self.skipped += 1
        return env.codec.commit

    def _act_targets(self) -> np.ndarray:
        env = self.env
        sim = env.sim
        eff, _ = self._decide()
        W = env.codec.W
        m = env.codec.mask2d(env)
        a = np.zeros(env.k, dtype=np.int64)
        for i, j in enumerate(env.window):
            j = int(j)
            t = eff.get(j, int(sim.workers[j]))
            lvl = min(t, W)
            cur = min(int(sim.workers[j]), W)
            if not m[i, lvl]:
                self.skipped += 1
                lvl = cur if m[i, cur] else int(np.flatnonzero(m[i])[0])
            a[i] = lvl
        return a

    def _act_priority(self) -> np.ndarray:
        env = self.env
        sim = env.sim
        eff, order = self._decide()
        prio = {int(j): i for i, j in enumerate(order)}
        a = np.full(env.k, -1.0, dtype=np.float32)
        started = [
            (prio.get(int(j), len(prio)), int(j), i)
            for i, j in enumerate(env.window)
            if sim.state[j] == JobState.QUEUED and eff.get(int(j), 0) > 0
        ]
        started.sort()
        for r, (_, _, i) in enumerate(started):
            a[i] = 1.0 - r / (len(started) + 1)
        return a

    def act(self) -> Any:
        """The action for the env's current state."""
        self._sync()
        mode = self.env.action_mode
        if mode == "sequential":
            return self._act_sequential()
        if mode == "targets":
            return self._act_targets()
        return self._act_priority()

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
    ) -> tuple[Any, Any]:
        """SB3 signature; the observation is only used for its batch shape."""
        a = self.act()
        batched = isinstance(observation, dict) and np.ndim(observation.get("jobs", 0)) == 3
        if batched:
            n = np.shape(observation["jobs"])[0]
            if n != 1:
                raise ValueError(
                    f"HeuristicPredictor is bound to one env but got a batch of {n} observations; "
                    "use one predictor per env"
                )
            return np.asarray(a)[None, ...], state
        return a, state


class ReclaimPredictor:
    """A reclaim rule acting through a reclaim agent's action space: ``ArylReclaim-v2``
    (:class:`~aryl_gym.envs.reclaim.ArylReclaimEnv`, simulator mode) or the ``reclaim`` agent of
    the two-agent view (:class:`~aryl_gym.envs.multiagent.ArylParallelEnv`).

    At a reclaim the rule chooses its ``n`` servers on the simulator's full state (as the loan
    phase would call it), and the predictor emits them one per step, in the rule's order, as
    server slots (server id minus the training servers). ``rule``: as the allocation env's
    ``reclaim`` option (``"aryl"``, ``"aryl-optimal"``, ``"default"``, a policy name, or a
    callable ``(view, n) -> server ids``)."""

    def __init__(self, rule: Any = "aryl", env: Any = None):
        self.rule = resolve_reclaim(rule)
        self.env = env.unwrapped if hasattr(env, "unwrapped") and not hasattr(env, "need") else env
        # was: env=None, an allocation env or the reclaim env's snapshot mode were accepted and
        # failed at the first act() with an AttributeError
        if self.env is None or not hasattr(self.env, "n_train") or getattr(self.env, "snaps", None) is not None:
            raise ValueError(
                "ReclaimPredictor acts through a reclaim agent's actions: give it ArylReclaim-v2 in "
                "simulator mode or the two-agent view (aryl_gym.envs.multiagent.ArylParallelEnv), got "
                f"{type(self.env).__name__ if self.env is not None else None}"
            )
        self._plan: list[int] = []

    def act(self) -> int:
        """The slot to pick now (0 when no reclaim is pending: the action is then ignored)."""
        env = self.env
        if env.sim is None:  # was: an AttributeError before the reclaim env's first reset
            raise RuntimeError("call env.reset() before predict()")
        need, picks = int(env.need), list(env.picks)
        if not need:
            return 0
        if not picks or self._plan[: len(picks)] != picks:  # a new reclaim: the rule decides
            sim = env.sim
            picked = self.rule(sim.view, need) if self.rule is not None else None
            if picked is None:  # the simulator's default rule (as the loan phase would use it)
                picked = default_reclaim(sim.view, need)
            self._plan = [int(s) for s in picked]
        return self._plan[len(picks)] - int(env.n_train)

    def predict(self, observation: Any = None, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[int, Any]:
        """SB3 signature; the observation is not read (the rule reads the simulator)."""
        return self.act(), state


def make_predictor(policy: str, env: Any, **kwargs: Any) -> HeuristicPredictor:
    """``make_predictor("aryl", env).predict(obs)`` -- see :class:`HeuristicPredictor`."""
    return HeuristicPredictor(policy, env, **kwargs)
