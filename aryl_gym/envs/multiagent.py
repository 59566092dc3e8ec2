"""The two-agent view: allocation and reclaim agents in one episode (PettingZoo's parallel API).

``aryl_gym/Aryl-v2`` (:class:`~aryl_gym.envs.allocation.ArylEnv`) asks an agent for the worker
counts and lets a fixed rule (Aryl's, ``reclaim="aryl"``) choose the loaned servers to give back;
``aryl_gym/ArylReclaim-v2`` (:class:`~aryl_gym.envs.reclaim.ArylReclaimEnv`) asks an agent for
the servers and lets a fixed policy (Aryl's allocation) decide the rest. Here both decisions
belong to agents, in the same episode: the place to study how allocation and reclaim interact
(an allocation that keeps elastic jobs' flexible workers on loaned servers makes reclaims cheap;
a reclaim agent that preempts wisely leaves the allocation more to work with).

**Protocol** (one decision at a time; docs/env.md, "Two-agent view"). The simulator runs rounds
as for ``Aryl-v2``. Before a round whose loan phase takes servers back, the *reclaim* agent
picks them, one server per step (as in ``ArylReclaim-v2``); the round then runs with those
picks, and at each decision point the *allocation* agent acts (as in ``Aryl-v2``, with its
``action_mode``: one step, or sub-steps and a commit in ``sequential`` mode). At every step
exactly one agent's decision is pending (:attr:`ArylParallelEnv.active`). Both agents stay in
``agents`` for the whole episode and get an entry in every returned dict (PettingZoo's parallel
API asks for an action from every live agent): the pending agent's observation is its
single-agent env's, the other's is all zeros, ``action_mask`` included (nothing to decide), and
its action, if given, is ignored. ``info[agent]["active"]`` says whose turn it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from aryl_gym.config import ScenarioConfig
from aryl_gym.envs.actions import discrete_action
from aryl_gym.envs.allocation import MAX_INVALID_STREAK, ArylEnv
from aryl_gym.envs.observation import ObservationBuilder
from aryl_gym.envs.options import EnvOptions
from aryl_gym.envs.reclaim import reclaim_mask, reclaim_observation
from aryl_gym.envs.reward import parse_weights
from aryl_gym.extras import install_hint
from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.view import ClusterView

try:
    from pettingzoo import ParallelEnv
except ModuleNotFoundError as exc:  # pragma: no cover - the multiagent extra is missing
    raise ModuleNotFoundError(
        f"the two-agent view needs pettingzoo, from the optional 'multiagent' extra: {install_hint('multiagent')}",
        name=exc.name,
    ) from exc

ALLOCATION = "allocation"
RECLAIM = "reclaim"
AGENTS: tuple[str, str] = (ALLOCATION, RECLAIM)

#: the reclaim agent's default reward weights (``ArylReclaim-v2``'s)
RECLAIM_REWARD: dict[str, float] = {"jct": 1.0, "preemption": 1.0}


def _int8_mask(space: spaces.Dict) -> spaces.Dict:
    """``space`` with its ``action_mask`` as an int8 ``Box(0, 1)`` (PettingZoo's convention:
    ``action_space(agent).sample(mask=obs[agent]["action_mask"])``)."""
    out = dict(space.spaces)
    out["action_mask"] = spaces.Box(0, 1, out["action_mask"].shape, np.int8)
    return spaces.Dict(out)


def _check_agent(agent: object) -> str:
    """``agent`` if it is one of :data:`AGENTS`; else a ValueError naming them (was: a bare
    ``KeyError: 'bob'`` from ``observation_space`` and ``action_space``)."""
    if not isinstance(agent, str) or agent not in AGENTS:
        raise ValueError(f"unknown agent {agent!r}; agents: {', '.join(AGENTS)}")
    return agent


def _zeros(space: spaces.Dict) -> dict[str, np.ndarray]:
    return {k: np.zeros(tuple(sp.shape or ()), dtype=sp.dtype) for k, sp in space.spaces.items()}


def single_agent_observation(obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """An agent's observation as its single-agent env gives it (``action_mask`` as float32), for
    an agent trained there (e.g. a learned ``Aryl-v2`` agent on the ``allocation`` seat)."""
    out = dict(obs)
    out["action_mask"] = np.asarray(obs["action_mask"], dtype=np.float32)
    return out


class ArylParallelEnv(ParallelEnv):
    """Allocation and reclaim agents in one episode (a PettingZoo ``ParallelEnv``).

    ## Description
    The episode of ``aryl_gym/Aryl-v2`` with the reclaim rule replaced by a second agent. The
    ``allocation`` agent decides at the allocation env's decision points; the ``reclaim`` agent
    picks, one per step, the loaned inference servers that a round's loan phase returns, before
    that round's arrivals and allocation (as ``ArylReclaim-v2`` does). One decision is pending
    at a time (:attr:`active`); the module docstring states the protocol.

    ## Observation Space
    ``allocation``: ``Aryl-v2``'s (its ``observation``, ``window``, ``action_mode``);
    ``reclaim``: ``ArylReclaim-v2``'s (``servers``, ``cluster``, ``reclaim``). In both,
    ``action_mask`` is int8 (0/1). The agent whose decision is not pending sees zeros.

    ## Action Space
    ``allocation``: ``Aryl-v2``'s (``action_mode``); ``reclaim``: ``Discrete(inference
    servers)``, the server to return (masked: loaned, not picked yet). Invalid actions are
    no-ops counted in the agent's ``info["invalid"]`` (the allocation env's rules; an invalid
    pick leaves the pick pending).

    ## Rewards
    The allocation env's named components (:mod:`aryl_gym.envs.reward`) for the simulated time
    since the last allocation step, weighted per agent: ``reward`` for ``allocation`` (default
    ``"jct"``), ``reclaim_reward`` for ``reclaim`` (default ``{"jct": 1, "preemption": 1}``).
    Both agents get them at the step that closes an allocation step (a commit, or the last pick
    of a reclaim that stopped a commit on its way); picks before the last get 0 (no simulated
    time passes). An invalid action costs its own agent its ``invalid_penalty`` /
    ``reclaim_invalid_penalty``. The allocation agent's non-zero rewards are exactly those of
    ``Aryl-v2`` for the same episode.

    ## Episode End
    As ``Aryl-v2`` (every job done; ``max_steps`` allocation steps, horizon, stall and thrash
    rules, early-end charge), and truncated after ``MAX_INVALID_STREAK`` invalid picks in a
    row. Both agents end together; the last ``info`` of each holds ``episode_result``.

    ## Arguments
    Every argument of ``Aryl-v2`` (:class:`~aryl_gym.envs.options.EnvOptions`: the allocation
    agent's env) but ``reclaim``, and ``reclaim_reward``, ``reclaim_invalid_penalty``.

    ## Version History
    * v2 (``world_version="v2"``, the default; ``"v1"`` plays World v1): first version.
    """

    metadata = {"name": "aryl_gym_two_agent_v2", "render_modes": ["ansi", "rgb_array"], "is_parallelizable": True}

    def __init__(
        self,
        options: EnvOptions | str | Path | ScenarioConfig | None = None,
        /,
        reclaim_reward: str | dict[str, float] | None = None,
        reclaim_invalid_penalty: float = 0.0,
        **kwargs: Any,
    ):
        if "reclaim" in kwargs or (isinstance(options, EnvOptions) and options.reclaim != "aryl"):
            raise ValueError(
                "the two-agent view has a reclaim agent: drop the reclaim argument (to play a fixed "
                "rule on that seat, act with aryl_gym.envs.predict.ReclaimPredictor(rule, env))"
            )
        self.alloc = ArylEnv(options, **kwargs)
        self.alloc.round_gate = self._gate
        self.alloc.set_reclaim(self._agent_picks)
        # was: ``reclaim_reward or RECLAIM_REWARD``, so "", {}, 0 or False gave the default weights
        # without a word (Aryl-v2 and ArylReclaim-v2 refuse them); errors now name the argument
        try:
            self.reclaim_weights = parse_weights(
                RECLAIM_REWARD if reclaim_reward is None else reclaim_reward, reclaim_invalid_penalty)
        except ValueError as exc:
            what = "reclaim_invalid_penalty" if str(exc).startswith("invalid_penalty") else "reclaim_reward"
            raise ValueError(f"{what} (the reclaim agent's reward): {exc}") from None
        self.config = self.alloc.config
        c = self.config.cluster
        self.n_train = c.train_servers
        self.n_inf = max(c.inf_servers, 1)
        self._builder = ObservationBuilder(self.config, 1, 1)
        self.render_mode = self.alloc.render_mode
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        rec_obs = spaces.Dict(
            {
                "servers": spaces.Box(0.0, 1.0, (self.n_inf, 8), np.float32),
                "cluster": self.alloc.observation_space["cluster"],  # type: ignore[index]
                "reclaim": spaces.Box(0.0, 1.0, (2,), np.float32),
                "action_mask": spaces.Box(0.0, 1.0, (self.n_inf,), np.float32),
            }
        )
        self.observation_spaces = {
            ALLOCATION: _int8_mask(self.alloc.observation_space),  # type: ignore[arg-type]
            RECLAIM: _int8_mask(rec_obs),
        }
        self.action_spaces = {ALLOCATION: self.alloc.action_space, RECLAIM: spaces.Discrete(self.n_inf)}
        self.need = 0  # servers the pending reclaim takes back (0: no reclaim pending)
        self.picks: list[int] = []  # server ids picked so far for it
        self._ready: list[int] | None = None  # the complete picks, for the round about to open
        self.invalid_total = {a: 0 for a in AGENTS}
        self._streak = 0
        self.steps = 0

    # -- the simulator's side ---------------------------------------------------------------------
    def _gate(self, sim: Simulator) -> bool:
        """Hold the allocation env before a round that takes loaned servers back, until the
        reclaim agent has picked them."""
        if self._ready is not None:
            return False
        due = sim.reclaims_due()
        if due > 0:
            self.need, self.picks = due, []
            return True
        return False

    def _agent_picks(self, view: ClusterView, n: int) -> Sequence[int] | None:
        """The reclaim rule the simulator calls in the loan phase: the agent's picks."""
        picks, self._ready = self._ready, None
        if picks is None or len(picks) != n:  # pragma: no cover - the gate always asks first
            raise RuntimeError(f"the loan phase wants {n} servers but the reclaim agent picked {picks}")
        return picks

    # -- PettingZoo API -------------------------------------------------------------------------
    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[_check_agent(agent)]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[_check_agent(agent)]

    @property
    def sim(self) -> Simulator | None:
        return self.alloc.sim

    @property
    def active(self) -> str:
        """The agent whose decision is pending."""
        return RECLAIM if self.alloc.held else ALLOCATION

    def reclaim_mask(self) -> np.ndarray:
        """The reclaim agent's allowed picks (boolean; all False when no reclaim is pending)."""
        sim = self.alloc.sim
        if sim is None:
            raise RuntimeError("call reset() before reclaim_mask()")
        if not self.alloc.held:
            return np.zeros(self.n_inf, dtype=bool)
        return reclaim_mask(sim, self.n_train, self.n_inf, self.picks, self.need)

    def action_masks(self, agent: str) -> np.ndarray:
        """``agent``'s boolean action mask now (all False when its decision is not pending, and
        once the episode has ended: was a live-looking mask with the commit allowed)."""
        if _check_agent(agent) == RECLAIM:
            return self.reclaim_mask()
        if self.alloc.held or (not self.agents and self.alloc.sim is not None):
            return np.zeros(self.alloc.codec.mask_size, dtype=bool)
        return self.alloc.action_masks()

    def _observe(self) -> dict[str, dict[str, np.ndarray]]:
        sim = self.alloc.sim
        assert sim is not None
        if self.alloc.held:
            mask = self.reclaim_mask()
            rec = reclaim_observation(sim, self._builder, self.n_train, self.n_inf, self.picks, self.need, mask)
            rec["action_mask"] = mask.astype(np.int8)
            return {ALLOCATION: _zeros(self.observation_spaces[ALLOCATION]), RECLAIM: rec}  # type: ignore[arg-type]
        obs = self.alloc.observation()
        obs["action_mask"] = obs["action_mask"].astype(np.int8)
        return {ALLOCATION: obs, RECLAIM: _zeros(self.observation_spaces[RECLAIM])}  # type: ignore[arg-type]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        # a reset that fails (a bad seed or options: the allocation env raises before it changes)
        # leaves the running episode as it was (was: its pending reclaim was forgotten, so the
        # next pick completed it with too few servers, or the loan phase raised)
        saved = (self.need, self.picks, self._ready, self.invalid_total, self._streak, self.steps)
        sim_before = self.alloc.sim
        self.need, self.picks, self._ready = 0, [], None
        self.invalid_total = {a: 0 for a in AGENTS}
        self._streak = 0
        self.steps = 0
        try:
            self.alloc.reset(seed=seed, options=options)
        except BaseException:
            if self.alloc.sim is sim_before:  # the episode did not change: it goes on as it was
                self.need, self.picks, self._ready, self.invalid_total, self._streak, self.steps = saved
            raise
        assert self.alloc.sim is not None
        self._builder.begin(self.alloc.sim)
        self.agents = list(AGENTS)
        active = self.active
        info = self._common()
        return self._observe(), {a: {**info, "active": a == active} for a in AGENTS}

    def _common(self) -> dict[str, Any]:
        sim = self.alloc.sim
        assert sim is not None
        return {"time": sim.now, "to_pick": max(self.need - len(self.picks), 0) if self.alloc.held else 0}

    def step(self, actions: dict[str, Any]):
        if not self.agents:
            raise RuntimeError("the episode has ended (or never started); call reset()")
        if not isinstance(actions, dict):
            # was: a TypeError ("'int' object is not iterable") or a list read as agent names
            raise TypeError(f"step() takes a dict {{agent: action}} (agents: {', '.join(AGENTS)}; the "
                            f"pending one is env.active = {self.active!r}), got {type(actions).__name__}")
        unknown = [a for a in actions if a not in AGENTS]
        if unknown:
            raise ValueError(f"unknown agent {unknown[0]!r}; agents: {', '.join(AGENTS)}")
        active = self.active
        if active not in actions:
            raise ValueError(
                f"the {active!r} agent's decision is pending (env.active): actions must hold its "
                f"action, got actions for {sorted(actions)}"
            )
        alloc = self.alloc
        sim = alloc.sim
        assert sim is not None
        out: tuple[float, bool, bool, dict[str, Any]] | None = None
        invalid = {ALLOCATION: 0, RECLAIM: 0}
        if active == ALLOCATION:
            if not alloc.act(actions[ALLOCATION]):
                out = alloc.finish()
            self._streak = 0
        else:
            a = discrete_action(actions[RECLAIM], self.n_inf)
            if a >= 0 and self.reclaim_mask()[a]:
                self.picks.append(self.n_train + a)
                self._streak = 0
                if len(self.picks) >= self.need:
                    self._ready, self.picks, self.need = list(self.picks), [], 0
                    if not alloc.resume() and alloc.pending:
                        out = alloc.finish()
            else:
                invalid[RECLAIM] = 1
                self._streak += 1
        self.steps += 1
        self.invalid_total[RECLAIM] += invalid[RECLAIM]
        comp: dict[str, float] = {}
        terminated = truncated = False
        alloc_info: dict[str, Any] = {}
        r_alloc = 0.0
        if out is not None:
            r_alloc, terminated, truncated, alloc_info = out
            comp = alloc_info["reward_components"]
            invalid[ALLOCATION] = int(alloc_info["invalid"])
            self.invalid_total[ALLOCATION] = int(alloc_info["invalid_total"])
        elif not alloc.held and alloc.sim is not None and (sim.done or sim.horizon_reached()):
            # the episode ended while no allocation step was open (a reclaim at its very start)
            terminated, truncated = sim.done, not sim.done
            alloc_info = {"episode_result": alloc.episode_result()}
            alloc_info["episode_metrics"] = alloc_info["episode_result"].to_dict()
        if self._streak >= MAX_INVALID_STREAK and not terminated:
            truncated = True
            if "episode_result" not in alloc_info:
                # was: an episode ended by the reclaim agent's invalid streak had no
                # episode_result in either agent's last info (docs: each last info holds it)
                alloc_info = {**alloc_info, "episode_result": alloc.episode_result()}
                alloc_info["episode_metrics"] = alloc_info["episode_result"].to_dict()
        r_rec = 0.0
        for k, w in self.reclaim_weights.items():
            if w and k != "invalid" and k in comp:
                r_rec += w * comp[k]
        r_rec -= self.reclaim_weights["invalid"] * invalid[RECLAIM]
        common = self._common()
        infos: dict[str, dict[str, Any]] = {}
        nxt = self.active
        for agent in AGENTS:
            info = {**common, "active": agent == nxt and not (terminated or truncated),
                    "invalid": invalid[agent], "invalid_total": self.invalid_total[agent]}
            infos[agent] = info
        infos[ALLOCATION].update({k: v for k, v in alloc_info.items() if k not in infos[ALLOCATION]})
        rec_comp = dict(comp)
        if rec_comp:
            rec_comp["invalid"] = -float(invalid[RECLAIM])
        infos[RECLAIM]["reward_components"] = rec_comp
        if terminated or truncated:
            for k in ("episode_result", "episode_metrics"):
                if k in alloc_info:
                    infos[RECLAIM][k] = alloc_info[k]
            if self._streak >= MAX_INVALID_STREAK:
                infos[RECLAIM]["invalid_streak"] = self._streak
        obs = self._observe()
        rewards = {ALLOCATION: float(r_alloc), RECLAIM: float(r_rec)}
        terms = dict.fromkeys(AGENTS, bool(terminated))
        truncs = dict.fromkeys(AGENTS, bool(truncated and not terminated))
        if terminated or truncated:
            self.agents = []
        return obs, rewards, terms, truncs, infos

    def render(self) -> Any:
        return self.alloc.render()

    def close(self) -> None:
        """Close the allocation env this view owns (idempotent). As for ``Aryl-v2``, whose
        ``close()`` has nothing to release (no window, file or process), the env stays usable:
        ``reset()`` and ``step()`` after ``close()`` play on."""
        self.alloc.close()


def parallel_env(**kwargs: Any) -> ArylParallelEnv:
    """``ArylParallelEnv(**kwargs)`` (PettingZoo's module-level constructor name)."""
    return ArylParallelEnv(**kwargs)


__all__ = ["AGENTS", "ALLOCATION", "RECLAIM", "RECLAIM_REWARD", "ArylParallelEnv", "parallel_env",
           "single_agent_observation"]
