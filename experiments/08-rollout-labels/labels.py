"""Rollout labels: one step of policy improvement by simulation (classification-based policy
iteration, Lagoudakis & Parr, ICML '03; the rollout algorithm of Bertsekas & Tsitsiklis).

The deployed agent acts by the masked argmax of its policy. At a state where that policy is
unsure (its top action's probability below ``threshold``), each of its next ``alternatives``
most likely actions is tried on a copy of the env (``copy.deepcopy``; the simulator is
deterministic given the episode seed), after which the argmax policy plays the episode to its
end. The action whose branch ends with the most reward, the policy's own included (its return
is the rest of the main episode), is the state's *label*. With the ``jct`` reward the branches'
returns differ by exactly their total JCTs (docs/env.md, "Reward"), so the label is the action
after which the policy's episode ends with the lowest total JCT. A branch that the thrash rule
ends loses to one that finishes, whatever the returns.

Two things keep it affordable:

* a branch first plays to the end of its decision point (``sequential`` mode: its sub-steps up to
  the commit); when the simulator's allocation there equals the main episode's (the alternative
  only reordered the same grants), the branch is dropped as equal to the policy's own action;
* the remaining branches play in lockstep, with one batched forward pass of the policy per step,
  as soon as ``4 x batch`` of them are pending at a decision point's end (so the env copies
  held at once stay bounded), and the rest at the episode's end.

Caveat (hindsight): each branch sees the episode's *actual* future arrivals and reclaims, so a
label is the best action for this trace, not in expectation over traces; a classifier trained
on many labels averages over them. ``gain`` records by how much the label beat the policy's own
action (in reward units: job-hours with the default ``scale``).

**Futures mode** (``futures = M >= 1``) labels an action's *expected* effect instead. A branch
that does not equal the own action at its commit forks there into ``M`` copies, each given a
fresh future (:meth:`aryl_gym.envs.allocation.ArylEnv.resample_future`: the jobs still to arrive
and the inference series after now, drawn for one of the probe's ``M`` seeds); the main
episode's env just after its own commit forks onto the same ``M`` futures (common random
numbers). An action's value is its return up to its commit plus its mean return over the
futures, and ``gain`` / ``gain_se`` are the label's mean paired advantage over the own action
and its standard error. ``horizon_h`` stops the forks that many simulated hours after the probed
state (a truncated rollout: less variance and cost, blind to effects after the horizon).

:func:`collect_rollout_labels` writes the labels in the layout of :func:`aryl_gym.train.bc.
load_demos` (``obs/KEY``, ``actions`` = labels, ``masks``) plus ``own`` (the policy's action),
``gain`` and ``p_top`` (the policy's top probability); :func:`finetune_on_labels` trains the
policy towards them with self-distilled anchor states. ``rollout_labels.py`` (beside this file) runs both;
README.md beside this file (the eighth and ninth attempts) has what they did to ``ppo-v1-kickstart``.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: the simulator arrays that make up the allocation compared at a decision point's end
_STATE_ARRAYS = ("workers", "pool", "inf_workers", "srv_base_gpus", "srv_flex_gpus", "overhead_left", "state")


@dataclass
class LabelSettings:
    """Which states are probed and how: a state is probed when the policy's top probability is
    below ``threshold`` and at least one other action has probability >= ``min_prob``, with
    probability ``probe_share``; the next ``alternatives`` most likely actions are tried."""

    threshold: float = 0.8
    min_prob: float = 0.05
    alternatives: int = 2
    probe_share: float = 0.3
    batch: int = 64
    prune: bool = True  # drop branches whose allocation equals the main episode's after the commit
    #: fresh futures per compared action (0: hindsight, the episode's own future); see the module
    futures: int = 0
    #: with futures: stop the branches this many simulated hours after the probed state (None: at the end)
    horizon_h: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold!r}")
        if not 0.0 <= self.min_prob <= 1.0:
            raise ValueError(f"min_prob must be in [0, 1], got {self.min_prob!r}")
        if int(self.alternatives) < 1:
            raise ValueError(f"alternatives must be >= 1, got {self.alternatives!r}")
        if not 0.0 <= self.probe_share <= 1.0:
            raise ValueError(f"probe_share must be in [0, 1], got {self.probe_share!r}")
        if int(self.batch) < 1:
            raise ValueError(f"batch must be >= 1, got {self.batch!r}")
        if isinstance(self.futures, bool) or not isinstance(self.futures, (int, np.integer)) or self.futures < 0:
            raise ValueError(f"futures must be an integer >= 0, got {self.futures!r}")
        if self.horizon_h is not None:
            if not self.futures:
                raise ValueError("horizon_h needs futures >= 1 (hindsight labels play to the episode's end)")
            if not (isinstance(self.horizon_h, (int, float)) and not isinstance(self.horizon_h, bool)
                    and 0.0 < float(self.horizon_h) < float("inf")):
                raise ValueError(f"horizon_h must be a number of hours > 0, got {self.horizon_h!r}")


class _Branch:
    __slots__ = ("probe", "first", "action", "env", "obs", "ret", "point", "committed", "outcome", "steps",
                 "future", "cut")

    def __init__(self, probe: int, action: int | None, env: Any, point: int, future: int = -1,
                 cut: float = float("inf")):
        self.probe = probe
        self.first = action
        self.action: int | None = action
        self.env = env
        self.obs: Any = None
        self.ret = 0.0
        self.point = point
        self.committed = False
        self.outcome: str | None = None  # "same", "forked", "unpaired", "finished", "thrashing", "horizon"
        self.steps = 0
        self.future = future  # index of the fresh future it plays (-1: the episode's own)
        self.cut = cut  # simulated time at which it stops ("horizon")


class _Probe:
    """What the futures mode keeps per probed state: the seeds of its fresh futures, the time its
    forks stop, the main episode's env just after its own commit (until the own action's forks
    are made from it) and whether they are."""

    __slots__ = ("seeds", "own_env", "forked", "cut")

    def __init__(self, seeds: list[int], cut: float):
        self.seeds = seeds
        self.own_env: Any = None
        self.forked = False
        self.cut = cut


def _allocation(env: Any) -> tuple[float, bytes]:
    sim = env.unwrapped.sim
    return float(sim.now), b"".join(np.ascontiguousarray(getattr(sim, k)).tobytes() for k in _STATE_ARRAYS)


class _Argmax:
    """The policy's masked action probabilities for a batch of observations."""

    def __init__(self, model: Any):
        self.policy = model.policy
        self.keys = list(getattr(model.observation_space, "spaces", {}) or [])
        if not self.keys:
            raise ValueError("rollout labels need a Dict observation space (the v1 envs)")

    def probs(self, obs: Sequence[Any], masks: Sequence[np.ndarray]) -> np.ndarray:
        import torch as th

        o = {k: th.as_tensor(np.stack([np.asarray(x[k]) for x in obs])) for k in self.keys}
        with th.no_grad():
            d = self.policy.get_distribution(o, action_masks=np.stack(masks))
            p = d.distribution.probs.cpu().numpy()
        return np.where(np.stack(masks), p, 0.0)


def _forks(b: _Branch, env: Any, fp: _Probe, action: int | None) -> list[_Branch]:
    """Copies of ``env`` (just after a commit), one per fresh future of the probe, resampled."""
    out = []
    for m, seed in enumerate(fp.seeds):
        e = copy.deepcopy(env)
        e.unwrapped.resample_future(seed)
        c = _Branch(b.probe, action, e, b.point, future=m, cut=fp.cut)
        c.committed = True
        c.action = None
        c.obs = e.unwrapped._obs()
        out.append(c)
    return out


def _play_branches(branches: list[_Branch], act: _Argmax, main_alloc: dict[int, tuple[float, bytes]],
                   settings: LabelSettings, probes: dict[int, _Probe] | None = None) -> list[_Branch]:
    """Play ``branches`` to their end in lockstep; returns the forks made on the way (futures
    mode: each alternative that does not equal the policy's own action, and the own action,
    played on each fresh future of its probe), played too."""
    from aryl_gym.rollout import env_action_masks, result_from_info

    active = list(branches)
    made: list[_Branch] = []
    while active:
        need = [b for b in active if b.action is None]
        for i in range(0, len(need), settings.batch):
            chunk = need[i : i + settings.batch]
            masks = [np.asarray(env_action_masks(b.env), dtype=bool) for b in chunk]
            for b, row in zip(chunk, act.probs([b.obs for b in chunk], masks)):
                b.action = int(np.argmax(row))
        still: list[_Branch] = []
        for b in active:
            b.obs, r, term, trunc, info = b.env.step(b.action)
            b.ret += float(r)
            b.steps += 1
            b.action = None
            if term or trunc:
                res = result_from_info(info)
                b.outcome = "thrashing" if (res is not None and res.thrashing) else "finished"
                b.env = None
                continue
            if b.future >= 0 and b.env.unwrapped.sim.now >= b.cut:
                b.outcome = "horizon"
                b.env = None
                continue
            if not b.committed and b.env.unwrapped.decision_point != b.point:
                b.committed = True
                if settings.prune and main_alloc.get(b.point) == _allocation(b.env):
                    b.outcome = "same"
                    b.env = None
                    continue
                if probes is not None:  # futures mode: play this action (and the own one) on fresh futures
                    fp = probes[b.probe]
                    if fp.own_env is None and not fp.forked:  # the main episode ended at this commit
                        b.outcome = "unpaired"
                        b.env = None
                        continue
                    new = _forks(b, b.env, fp, b.first)
                    if not fp.forked:  # the own action's forks: once per probe
                        fp.forked = True
                        new += _forks(b, fp.own_env, fp, None)
                        fp.own_env = None
                    b.outcome = "forked"
                    b.env = None
                    made.extend(new)
                    still.extend(new)
                    continue
            still.append(b)
        active = still
    if probes is not None:
        for b in branches:
            done = probes.get(b.probe)
            if done is not None:
                done.own_env = None  # every alternative of the probe has been played
    return made


def probe_episode(model: Any, env: Any, seed: int, settings: LabelSettings, rng: np.random.Generator,
                  ) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Play ``model``'s argmax on ``env`` for episode ``seed`` and label the probed states.

    Returns one record per probed state (``obs``, ``mask``, ``own``, ``own_return``, ``label``,
    ``gain``, ``p_top``, ``branches``: ``(action, return, outcome)`` of each alternative) and the episode's
    figures (steps, avg JCT, thrashing, branches played, pruned and their env steps)."""
    from aryl_gym.rollout import env_action_masks, result_from_info

    act = _Argmax(model)
    model.policy.set_training_mode(False)
    obs, _ = env.reset(seed=int(seed), options={"episode_seed": int(seed)})
    rewards: list[float] = []
    probes: list[dict[str, Any]] = []
    branches: list[_Branch] = []
    pending: list[_Branch] = []  # branches not played yet (each holds a copy of the env)
    main_alloc: dict[int, tuple[float, bytes]] = {}
    futures = int(settings.futures)
    fprobes: dict[int, _Probe] | None = {} if futures else None
    at_point: list[int] = []  # probes at the current decision point (futures mode)
    commit_step: dict[int, int] = {}  # probe -> main episode's step count after its commit
    horizon_s = float(settings.horizon_h) * 3600.0 if settings.horizon_h is not None else float("inf")
    # pending branches play once this many wait (forks multiply them in futures mode)
    play_at = max(1, (4 * int(settings.batch)) // (1 + futures))
    while True:
        m = np.asarray(env_action_masks(env), dtype=bool)
        p = act.probs([obs], [m])[0]
        own = int(np.argmax(p))
        point = int(env.unwrapped.decision_point)
        if p[own] < settings.threshold and rng.random() < settings.probe_share:
            order = [int(x) for x in np.argsort(-p, kind="stable") if int(x) != own]
            alts = [x for x in order[: int(settings.alternatives)] if p[x] >= settings.min_prob and m[x]]
            if alts:
                k = len(probes)
                probes.append({"t": len(rewards), "obs": {key: np.asarray(v).copy() for key, v in obs.items()},
                               "mask": m.copy(), "own": own, "p_top": float(p[own])})
                pending.extend(_Branch(k, a, copy.deepcopy(env), point) for a in alts)
                if fprobes is not None:
                    fprobes[k] = _Probe([int(x) for x in rng.integers(0, 2**31 - 1, size=futures)],
                                        float(env.unwrapped.sim.now) + horizon_s)
                    at_point.append(k)
        obs, r, term, trunc, info = env.step(own)
        rewards.append(float(r))
        if term or trunc:
            res = result_from_info(info)
            for k in at_point:  # the episode ended at the probe's commit: no future to sample
                commit_step[k] = len(rewards)
            break
        if env.unwrapped.decision_point != point:
            main_alloc[point] = _allocation(env)
            if fprobes is not None and at_point:
                own_env = copy.deepcopy(env)  # the own action, just after its commit (shared)
                for k in at_point:
                    fprobes[k].own_env = own_env
                    commit_step[k] = len(rewards)
                at_point = []
            if len(pending) >= play_at:
                # every pending branch started at this decision point or before: the main
                # episode's allocation after each of them is known, so they can play now
                # (bounds the env copies held at once)
                branches.extend(pending + _play_branches(pending, act, main_alloc, settings, fprobes))
                pending = []
    branches.extend(pending + _play_branches(pending, act, main_alloc, settings, fprobes))
    thr_main = bool(res is not None and res.thrashing)
    suffix = np.cumsum(np.asarray(rewards)[::-1])[::-1]
    for pr in probes:
        pr["branches"] = []
    for b in branches:
        probes[b.probe]["branches"].append((b.first, b.ret, b.outcome))
    if fprobes is not None:
        _expected_labels(probes, branches, rewards, commit_step, futures)
    else:
        _hindsight_labels(probes, suffix, thr_main)
    stats = {"steps": float(len(rewards)), "avg_jct": float(res.avg_jct) if res is not None else float("nan"),
             "thrashing": float(thr_main), "probes": float(len(probes)), "branches": float(len(branches)),
             "pruned": float(sum(b.outcome == "same" for b in branches)),
             "branch_steps": float(sum(b.steps for b in branches)),
             "switched": float(sum(p["label"] != p["own"] for p in probes))}
    return probes, stats


def _hindsight_labels(probes: list[dict[str, Any]], suffix: np.ndarray, thr_main: bool) -> None:
    """Each probe's label: the best of its branches on the episode's own future."""
    for pr in probes:
        pr["own_return"] = float(suffix[pr["t"]])
        best, best_ret, best_thr = pr["own"], pr["own_return"], thr_main
        for a, ret, outcome in pr["branches"]:
            if outcome == "same":
                continue
            thr = outcome == "thrashing"
            if (best_thr and not thr) or (thr == best_thr and ret > best_ret + 1e-9):
                best, best_ret, best_thr = a, ret, thr
        pr["label"] = int(best)
        pr["gain"] = float(best_ret - suffix[pr["t"]]) if best != pr["own"] else 0.0
        pr["gain_se"] = 0.0


def _expected_labels(probes: list[dict[str, Any]], branches: list[_Branch], rewards: list[float],
                     commit_step: dict[int, int], futures: int) -> None:
    """Futures mode: each compared action's value is its return up to its commit (on the
    episode's own future) plus its mean return over the probe's fresh futures; the own action
    and the alternatives play the same futures, so their differences are paired. An action one
    of whose forks thrashed loses to one whose forks all finished. ``gain`` is the label's mean
    paired advantage over the own action, ``gain_se`` its standard error."""
    fork_ret: dict[tuple[int, int | None], np.ndarray] = {}
    fork_thr: dict[tuple[int, int | None], bool] = {}
    head: dict[tuple[int, int], float] = {}
    for b in branches:
        if b.outcome == "forked" and b.first is not None:
            head[(b.probe, b.first)] = b.ret
        elif b.future >= 0:
            key = (b.probe, b.first)
            fork_ret.setdefault(key, np.zeros(futures))[b.future] = b.ret
            fork_thr[key] = fork_thr.get(key, False) or b.outcome == "thrashing"
    for k, pr in enumerate(probes):
        pr["label"], pr["gain"], pr["gain_se"] = pr["own"], 0.0, 0.0
        own = fork_ret.get((k, None))
        if own is None:  # every alternative equalled the own action (or the episode ended)
            continue
        own_q = float(sum(rewards[pr["t"] : commit_step[k]])) + own
        own_thr = fork_thr[(k, None)]
        best_thr, best_mean = own_thr, float(own_q.mean())
        for a in sorted({a for (kk, a) in head if kk == k}):
            q = head[(k, a)] + fork_ret[(k, a)]
            thr = fork_thr[(k, a)]
            d = q - own_q
            if (best_thr and not thr) or (thr == best_thr and float(q.mean()) > best_mean + 1e-9):
                best_thr, best_mean = thr, float(q.mean())
                pr["label"], pr["gain"] = int(a), float(d.mean())
                pr["gain_se"] = float(d.std(ddof=1) / np.sqrt(futures)) if futures > 1 else float("inf")


def collect_rollout_labels(
    model: Any,
    env: Any,
    seeds: Sequence[int],
    out: str | Path,
    settings: LabelSettings | None = None,
    rng_seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """:func:`probe_episode` on each of ``seeds``; the labels go to ``out`` (rewritten after each
    episode, so an interrupted run keeps what it computed). Returns the summed figures."""
    settings = settings or LabelSettings()
    rng = np.random.default_rng(int(rng_seed))
    rows: list[dict[str, Any]] = []
    total: dict[str, float] = {}
    tic = time.perf_counter()
    for i, s in enumerate(seeds):
        probes, st = probe_episode(model, env, int(s), settings, rng)
        rows.extend(probes)
        for k, v in st.items():
            total[k] = total.get(k, 0.0) + v
        if rows:
            write_labels(rows, out)
        if log:
            log(f"seed {s} ({i + 1}/{len(seeds)}): {int(st['steps'])} steps, {int(st['probes'])} probed, "
                f"{int(st['switched'])} relabelled, {int(st['pruned'])}/{int(st['branches'])} branches equal "
                f"to the policy's own action, avg JCT {st['avg_jct']:,.0f} s [{time.perf_counter() - tic:.0f} s]")
    total["episodes"] = float(len(seeds))
    return total


def write_labels(rows: Sequence[dict[str, Any]], out: str | Path) -> None:
    arrays = {f"obs/{k}": np.stack([r["obs"][k] for r in rows]) for k in rows[0]["obs"]}
    arrays["actions"] = np.asarray([r["label"] for r in rows], dtype=np.int64)
    arrays["masks"] = np.stack([r["mask"] for r in rows])
    arrays["own"] = np.asarray([r["own"] for r in rows], dtype=np.int64)
    arrays["gain"] = np.asarray([r["gain"] for r in rows], dtype=np.float64)
    arrays["gain_se"] = np.asarray([r.get("gain_se", 0.0) for r in rows], dtype=np.float64)
    arrays["p_top"] = np.asarray([r["p_top"] for r in rows], dtype=np.float64)
    tmp = Path(f"{out}.{os.getpid()}.tmp.npz")  # two writers never share a temporary file
    np.savez(tmp, **arrays)  # type: ignore[arg-type]
    tmp.replace(out)


def own_actions(model: Any, obs: dict[str, np.ndarray], masks: np.ndarray, batch: int = 4096) -> np.ndarray:
    """The model's masked argmax on stored states (for self-distilled anchors)."""
    act = _Argmax(model)
    out = []
    for i in range(0, len(masks), batch):
        o = [{k: obs[k][j] for k in act.keys} for j in range(i, min(i + batch, len(masks)))]
        out.append(np.argmax(act.probs(o, list(masks[i : i + batch])), axis=1))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def finetune_on_labels(
    model: Any,
    labels: Sequence[str | Path],
    anchors: str | Path,
    work: str | Path,
    margin: float = 0.0,
    min_t: float = 0.0,
    repeat: int = 20,
    epochs: int = 3,
    learning_rate: float = 1e-4,
    batch_size: int = 512,
    log: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """Masked cross-entropy (:func:`aryl_gym.train.bc.pretrain`) on the anchor states, labelled
    with the model's *own* argmax (so the policy stays where no label says otherwise), plus the
    probed states of ``labels`` repeated ``repeat`` times, labelled with the rollout label where it
    beat the model's action by more than ``margin`` (reward units) and with the model's own
    action elsewhere; labels collected on fresh futures also need ``gain > min_t * gain_se``.
    ``margin = inf`` is the control: the same training with no relabelling.
    The training set is written to ``work`` (an .npz). Returns the fit's figures, the relabelled
    count and the share of relabelled states whose label the model takes afterwards."""
    from aryl_gym.train.bc import load_demos, pretrain

    aobs, _, amask = load_demos(anchors)
    if not isinstance(aobs, dict) or amask is None:
        raise ValueError(f"{anchors}: anchors need Dict observations and masks")
    parts = [np.load(p, allow_pickle=False) for p in labels]
    keys = sorted(aobs)
    for p, d in zip(labels, parts):
        missing = [k for k in ("actions", "masks", "own", "gain") + tuple(f"obs/{k}" for k in keys) if k not in d.files]
        if missing:
            raise ValueError(f"{p}: not a rollout-labels file ({missing} missing; write one with "
                             "rollout_labels.py collect)")
    lobs = {k: np.concatenate([d[f"obs/{k}"] for d in parts]) for k in keys}
    lmask = np.concatenate([d["masks"] for d in parts])
    own = np.concatenate([d["own"] for d in parts])
    lab = np.concatenate([d["actions"] for d in parts])
    gain = np.concatenate([d["gain"] for d in parts])
    # the label's standard error (futures mode; 0 for hindsight labels, which then always pass)
    se = np.concatenate([d["gain_se"] if "gain_se" in d.files else np.zeros(len(d["gain"])) for d in parts])
    switched = (lab != own) & (gain > margin) & (gain > min_t * se)
    target = np.where(switched, lab, own)
    anchor_act = own_actions(model, aobs, amask)
    idx = np.tile(np.arange(len(target)), int(repeat))
    arrays = {f"obs/{k}": np.concatenate([aobs[k], lobs[k][idx]]) for k in keys}
    arrays["actions"] = np.concatenate([anchor_act, target[idx]]).astype(np.int64)
    arrays["masks"] = np.concatenate([amask, lmask[idx]])
    np.savez(work, **arrays)  # type: ignore[arg-type]
    fit = pretrain(model, work, epochs=int(epochs), batch_size=int(batch_size), learning_rate=float(learning_rate),
                   log=log)
    taken = float("nan")
    if switched.any():
        now = own_actions(model, {k: v[switched] for k, v in lobs.items()}, lmask[switched])
        taken = float(np.mean(now == target[switched]))
    return {**fit, "probed": float(len(target)), "relabelled": float(switched.sum()), "relabelled_taken": taken}
