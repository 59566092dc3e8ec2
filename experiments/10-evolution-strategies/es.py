"""Evolution strategies on the deployed policy: the action head tuned by the episodes' JCT.

The shipped agents act by the masked *argmax* of their policy, and PPO improves the *sampled*
policy through per-step advantages whose signal, from a good start, is below their noise
(attempts two to nine, experiments/). This module optimises the deployed quantity itself:
the average JCT of whole episodes played by the argmax policy. It is the natural evolution
strategy of Salimans et al. (2017, "Evolution Strategies as a Scalable Alternative to
Reinforcement Learning") restricted to a small subspace, the policy's action head
(:class:`~aryl_gym.train.setpolicy.SlotActionHead`: the grant, release and commit scorers, 3 x
(d + 1) numbers for embedding width d), with the feature extractor frozen.

Each iteration draws ``pairs`` Gaussian directions ``eps`` and plays ``theta + sigma eps`` and
``theta - sigma eps`` (antithetic pairs) on the same ``traces`` fresh training-world episodes
(common random numbers: every candidate sees the same arrivals and inference series), plus
the current ``theta`` and the start ``theta_0`` on the same episodes. A candidate's fitness is
``-mean_t log(avg JCT_t)`` (every trace weighs the same whatever its load); an episode the
simulator's thrash rule ends ranks last. Fitnesses are replaced by centred ranks (robust to
outliers), the gradient estimate is ``sum_i (u+_i - u-_i) eps_i / (2 pairs sigma)`` and Adam
takes the step. Because each iteration's episodes are fresh and the candidates are played
before the update, the paired ratio ``avg JCT(theta) / avg JCT(theta_0)`` on them is an
unbiased learning curve on unseen traces (:attr:`ESRow.ratio_to_start`).

Episodes run in lockstep: one batched forward of the shared extractor per step for all
candidates, then each row's own head (:class:`HeadBatch`), so a candidate costs env steps only.
``workers`` > 1 splits the episodes over processes (each with its own copy of the model).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from aryl_gym.train.dagger import RolloutEnvFactory

__all__ = ["ESRow", "ESSettings", "HeadBatch", "RolloutEnvFactory", "centred_ranks", "es_finetune", "fitness",
           "head_vector", "play", "set_head_vector"]


@dataclass(frozen=True)
class ESSettings:
    """Knobs of :func:`es_finetune` (defaults: the tenth attempt, README.md beside this file)."""

    iterations: int = 40
    pairs: int = 8  # antithetic pairs per iteration (2 x pairs candidates)
    traces: int = 4  # fresh training-world episodes per iteration, shared by all candidates
    sigma: float = 0.02  # perturbation scale (the head's weights are O(0.1-1))
    learning_rate: float = 0.005  # Adam step on theta
    seed: int = 0  # directions (numpy) and the first episode seed of iteration 0
    first_episode_seed: int = 50000  # iteration i plays seeds first + i * traces ...

    def __post_init__(self) -> None:
        for name in ("iterations", "pairs", "traces"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"ESSettings.{name} must be an integer >= 1, got {v!r}")
        for name in ("sigma", "learning_rate"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
                raise ValueError(f"ESSettings.{name} must be a finite number > 0, got {v!r}")


@dataclass
class ESRow:
    """Figures of one iteration (all on that iteration's fresh episodes, before its update)."""

    iteration: int
    seeds: list[int]
    ratio_to_start: float  # geometric mean of avg JCT(theta) / avg JCT(theta_0) over the traces
    # neither thrashed on (NaN if none)
    best_ratio: float  # the best candidate's, same measure
    differing: float  # share of candidate episodes whose avg JCT differs from theta's
    thrashing: int  # candidate episodes ended by the thrash rule
    theta_thrashing: int  # theta's own episodes ended by the thrash rule
    step_norm: float
    seconds: float


def _action_head(policy: Any) -> Any:
    from aryl_gym.train.setpolicy import SlotActionHead

    head = getattr(policy, "action_net", None)
    if not isinstance(head, SlotActionHead):
        raise ValueError("evolution strategies tune a MaskableSetPolicy's action head (SlotActionHead); "
                         f"this policy has {type(head).__name__}")
    return head


def head_vector(policy: Any) -> np.ndarray:
    """The action head's parameters as one float64 vector (grant, release, commit; weight, bias)."""
    import torch as th

    head = _action_head(policy)
    with th.no_grad():
        return th.nn.utils.parameters_to_vector(head.parameters()).double().numpy().copy()


def set_head_vector(policy: Any, v: np.ndarray) -> None:
    """Write ``v`` (from :func:`head_vector`'s layout) into the policy's action head."""
    import torch as th

    head = _action_head(policy)
    n = sum(p.numel() for p in head.parameters())
    v = np.asarray(v, dtype=np.float64)
    if v.shape != (n,) or not np.isfinite(v).all():
        raise ValueError(f"the action head has {n} parameters; got an array of shape {v.shape}"
                         f"{'' if np.isfinite(v).all() else ' with non-finite values'}")
    with th.no_grad():
        th.nn.utils.vector_to_parameters(th.as_tensor(v, dtype=th.float32), head.parameters())


class HeadBatch:
    """Masked argmax actions of one policy whose action head differs per row.

    The extractor runs once for the batch; each row's logits come from its own head vector,
    then the same operations as :meth:`agents.learned.LearnedAgent.masked_argmax` (normalise,
    masked to -1e8, normalise, softmax, argmax)."""

    def __init__(self, model: Any):
        self.policy = model.policy
        head = _action_head(self.policy)
        self.d = int(head.d)
        self.release = head.rel is not None
        self.n = sum(p.numel() for p in head.parameters())
        self.keys = list(getattr(model.observation_space, "spaces", {}) or [])

    def _split(self, heads: Any) -> list[tuple[Any, Any]]:
        d = self.d
        parts, o = [], 0
        for _ in range(3 if self.release else 2):
            parts.append((heads[:, o : o + d], heads[:, o + d]))
            o += d + 1
        return parts

    def actions(self, obs: Sequence[dict[str, np.ndarray]], masks: np.ndarray, heads: np.ndarray) -> np.ndarray:
        import torch as th

        pol = self.policy
        if heads.shape != (len(obs), self.n):
            raise ValueError(f"heads must have shape ({len(obs)}, {self.n}), got {heads.shape}")
        o = {k: th.as_tensor(np.stack([np.asarray(x[k]) for x in obs])) for k in self.keys}
        h_t = th.as_tensor(heads, dtype=th.float32)
        with th.no_grad():
            features = pol.extract_features(o, pol.pi_features_extractor)
            latent = pol.mlp_extractor.forward_actor(features)
            b = latent.shape[0]
            g = latent[:, : self.d]
            h = latent[:, self.d :].reshape(b, -1, self.d)
            parts = self._split(h_t)
            out = [th.einsum("bkd,bd->bk", h, w) + bias[:, None] for w, bias in parts[:-1]]
            wc, bc = parts[-1]
            out.append((g * wc).sum(dim=1, keepdim=True) + bc[:, None])
            logits = th.cat(out, dim=1)
            logits = logits - logits.logsumexp(dim=-1, keepdim=True)
            m = th.as_tensor(np.asarray(masks), dtype=th.bool).reshape(logits.shape)
            logits = th.where(m, logits, th.tensor(-1e8, dtype=logits.dtype))
            logits = logits - logits.logsumexp(dim=-1, keepdim=True)
            return th.argmax(th.softmax(logits, dim=-1), dim=1).numpy()


def play(model: Any, envs: Sequence[Any], seeds: Sequence[int], heads: np.ndarray,
         batcher: HeadBatch | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Play ``envs[i]`` on episode ``seeds[i]`` with head ``heads[i]`` (masked argmax), all in
    lockstep. Returns each episode's avg JCT and whether the thrash rule ended it."""
    from aryl_gym.rollout import env_action_masks, result_from_info

    n = len(envs)
    if len(seeds) != n or len(heads) != n:
        raise ValueError(f"play: {n} envs, {len(seeds)} seeds and {len(heads)} heads; give one of each per episode")
    bat = batcher or HeadBatch(model)
    heads = np.asarray(heads, dtype=np.float64)
    obs: list[Any] = [None] * n
    for i, (env, s) in enumerate(zip(envs, seeds)):
        obs[i], _ = env.reset(seed=int(s), options={"episode_seed": int(s)})
    jct = np.full(n, np.nan)
    thr = np.zeros(n, dtype=bool)
    live = list(range(n))
    while live:
        masks = np.stack([np.asarray(env_action_masks(envs[i]), dtype=bool) for i in live])
        acts = bat.actions([obs[i] for i in live], masks, heads[live])
        still = []
        for i, a in zip(live, acts):
            obs[i], _r, term, trunc, info = envs[i].step(int(a))
            if term or trunc:
                res = result_from_info(info)
                if res is None:
                    raise RuntimeError("the env's final info carries no episode result")
                jct[i], thr[i] = float(res.avg_jct), bool(res.thrashing)
            else:
                still.append(i)
        live = still
    return jct, thr


def centred_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks of ``x`` scaled to [-0.5, 0.5] (ties share their mean rank); higher is better."""
    x = np.asarray(x, dtype=np.float64)
    if x.size < 2:
        return np.zeros_like(x)
    order = np.argsort(x, kind="stable")
    r = np.empty(x.size)
    r[order] = np.arange(x.size, dtype=np.float64)
    for v in np.unique(x):  # ties: the mean of their ranks
        sel = x == v
        if sel.sum() > 1:
            r[sel] = r[sel].mean()
    return r / (x.size - 1) - 0.5


def fitness(jct: np.ndarray, thr: np.ndarray) -> np.ndarray:
    """Per candidate (rows) over traces (columns): ``-mean log avg JCT``; -inf if any episode
    thrashed or left no finished job."""
    with np.errstate(divide="ignore", invalid="ignore"):
        f = -np.log(jct).mean(axis=1)
    bad = thr.any(axis=1) | ~np.isfinite(jct).all(axis=1) | ~np.isfinite(f)
    return np.where(bad, -np.inf, f)


class _Adam:
    def __init__(self, n: int, lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8):
        self.m = np.zeros(n)
        self.v = np.zeros(n)
        self.t = 0
        self.lr, self.b1, self.b2, self.eps = lr, b1, b2, eps

    def step(self, grad: np.ndarray) -> np.ndarray:
        """The ascent step for ``grad``."""
        self.t += 1
        self.m = self.b1 * self.m + (1 - self.b1) * grad
        self.v = self.b2 * self.v + (1 - self.b2) * grad * grad
        mh = self.m / (1 - self.b1**self.t)
        vh = self.v / (1 - self.b2**self.t)
        return self.lr * mh / (np.sqrt(vh) + self.eps)


class _Player:
    """A model, its batcher and a pool of envs (grown on demand, reused across iterations)."""

    def __init__(self, model: Any, env_factory: Callable[[], Any]):
        self.model, self.factory = model, env_factory
        self.envs: list[Any] = []
        self.batch = HeadBatch(model)

    def __call__(self, seeds: list[int], heads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        while len(self.envs) < len(seeds):
            self.envs.append(self.factory())
        return play(self.model, self.envs[: len(seeds)], seeds, heads, self.batch)


_WORKER: list[_Player] = []  # the worker process's own player (set by _worker_init)


def _worker_init(model_path: str, env_factory: Callable[[], Any]) -> None:
    import torch as th
    from aryl_gym.agents.learned import load_agent

    th.set_num_threads(1)
    _WORKER[:] = [_Player(load_agent(model_path).model, env_factory)]


def _worker_play(seeds: list[int], heads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return _WORKER[0](seeds, heads)


def es_finetune(
    model: Any,
    env_factory: Callable[[], Any],
    settings: ESSettings | None = None,
    *,
    workers: int = 1,
    model_path: str | None = None,
    evaluate: Callable[[Any, int], dict[str, float]] | None = None,
    eval_every: int = 0,
    log: Callable[[str], None] | None = None,
    on_iteration: Callable[[ESRow, np.ndarray], None] | None = None,
) -> list[ESRow]:
    """Tune ``model``'s action head (changed in place) by antithetic ES (module docstring).

    ``env_factory()`` makes one training-world env (e.g. the agent's rollout env: its
    config's worlds, no reward wrappers); it must be picklable when ``workers`` > 1, and then
    ``model_path`` (the saved start model) is what the workers load. ``evaluate(model, it)``,
    every ``eval_every`` iterations (and after the last), scores theta the way a run scores
    its checkpoints; its figures are logged. ``on_iteration(row, theta)`` is called after each
    update (e.g. to save)."""
    s = settings or ESSettings()
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if workers > 1 and not model_path:
        raise ValueError("workers > 1 need model_path: the saved start model the worker processes load")
    say = log or (lambda _m: None)
    theta0 = head_vector(model.policy)
    theta = theta0.copy()
    n = theta.size
    rng = np.random.default_rng(s.seed)
    adam = _Adam(n, s.learning_rate)
    rows: list[ESRow] = []
    pool = (ProcessPoolExecutor(workers, initializer=_worker_init, initargs=(str(model_path), env_factory))
            if workers > 1 else None)
    local = _Player(model, env_factory) if pool is None else None
    try:
        for it in range(s.iterations):
            tic = time.perf_counter()
            seeds = [s.first_episode_seed + it * s.traces + t for t in range(s.traces)]
            eps = rng.standard_normal((s.pairs, n))
            cands = np.concatenate([theta + s.sigma * eps, theta - s.sigma * eps, theta[None], theta0[None]])
            c = len(cands)
            ep_heads = np.repeat(cands, s.traces, axis=0)  # candidate-major
            ep_seeds = [sd for _ in range(c) for sd in seeds]
            if pool is None:
                assert local is not None
                jct, thr = local(ep_seeds, ep_heads)
            else:
                chunks = np.array_split(np.arange(len(ep_seeds)), workers)
                futs = [pool.submit(_worker_play, [ep_seeds[i] for i in ch], ep_heads[ch]) for ch in chunks if len(ch)]
                parts = [f.result() for f in futs]
                jct = np.concatenate([p[0] for p in parts])
                thr = np.concatenate([p[1] for p in parts])
            jct = jct.reshape(c, s.traces)
            thr = thr.reshape(c, s.traces)
            f = fitness(jct, thr)
            u = centred_ranks(f[: 2 * s.pairs])
            grad = ((u[: s.pairs] - u[s.pairs :])[:, None] * eps).sum(axis=0) / (2 * s.pairs * s.sigma)
            step = adam.step(grad)
            theta = theta + step
            ok = ~thr[-2] & ~thr[-1]  # a thrashed episode's avg JCT covers its finished jobs only
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = float(np.exp(np.mean(np.log(jct[-2, ok] / jct[-1, ok])))) if ok.any() else float("nan")
                best = float(np.exp(-f[: 2 * s.pairs].max() + f[-1])) if np.isfinite(f[-1]) else float("nan")
            row = ESRow(iteration=it, seeds=seeds, ratio_to_start=ratio, best_ratio=best,
                        differing=float(np.mean(jct[: 2 * s.pairs] != jct[-2][None])),
                        thrashing=int(thr[: 2 * s.pairs].sum()), theta_thrashing=int(thr[-2].sum()),
                        step_norm=float(np.linalg.norm(step)), seconds=time.perf_counter() - tic)
            rows.append(row)
            set_head_vector(model.policy, theta)
            say(f"es {it + 1}/{s.iterations}: theta / start {row.ratio_to_start:.4f} on seeds {seeds[0]}-{seeds[-1]}, "
                f"best candidate {row.best_ratio:.4f}, {row.differing:.0%} of candidate episodes differ, "
                f"{row.thrashing} thrashed, |step| {row.step_norm:.4f} [{row.seconds:.0f} s]")
            if on_iteration is not None:
                on_iteration(row, theta)
            if evaluate is not None and eval_every > 0 and ((it + 1) % eval_every == 0 or it + 1 == s.iterations):
                ev = evaluate(model, it + 1)
                say(f"es eval @ {it + 1}: " + ", ".join(f"{k} {v:,.4g}" for k, v in ev.items()))
    finally:
        if pool is not None:
            pool.shutdown()
    return rows
