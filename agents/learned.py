"""Learned agents: load an SB3 model (a shipped name or a path) as an SB3-style ``predict`` policy.

``load_agent("ppo-testbed")`` resolves ``agents/pretrained/ppo-testbed.zip`` and its config
``ppo-testbed.yaml`` (the resolved training config: algorithm, scenario, env id and kwargs);
``load_agent("runs/RUN")`` a run folder (its ``best_model.zip`` if present, else ``model.zip``);
``load_agent("path/model.zip")`` a model file (its config is looked for beside it);
``load_agent("runs/tiny__rllib_ppo__0__TIME")`` an RLlib run folder or checkpoint
(:class:`RLlibAgent`, ``aryl-gym train --backend rllib``);
``load_agent("logs/ppo_mask/aryl_gym-Aryl-v0_1")`` an rl-baselines3-zoo experiment folder (or
``logs/ppo_mask``, or ``logs``: the latest experiment), see :func:`resolve_zoo_folder`. The returned
:class:`LearnedAgent` has ``predict(obs, state=None, episode_start=None, deterministic=True)``
and passes the action mask to ``MaskablePPO.predict(action_masks=...)``: from the argument
``action_masks`` when given, else from the observation's ``action_mask`` key. Observation
statistics saved by ``VecNormalize`` (``vecnormalize.pkl`` beside the model) are applied.

torch and stable-baselines3 are imported only when an agent is loaded (never on
``import aryl_gym``).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import yaml
from gymnasium import spaces

from aryl_gym.config import ConfigError

PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"


def shipped_agents() -> list[str]:
    """Names of the agents shipped under ``agents/pretrained/``."""
    return sorted(p.stem for p in PRETRAINED_DIR.glob("*.zip"))


def is_rllib_source(name_or_path: str | Path) -> bool:
    """An RLlib run folder or checkpoint (file tests only; no ray import)."""
    p = Path(str(name_or_path))
    return p.is_dir() and any((p / f).is_file() for f in (
        "rllib.json", "rllib_checkpoint.json", "class_and_ctor_args.pkl"))


def resolve_agent_path(name_or_path: str | Path) -> tuple[Path, Path | None, Path | None]:
    """``(model.zip, config.yaml or None, vecnormalize.pkl or None)`` for a name or a path
    (for an RLlib run folder or checkpoint: its RLModule's weights file in place of the zip)."""
    text = str(name_or_path)
    p = Path(text)
    if is_rllib_source(p):
        mdir = rllib_module_dir(p)
        state = module_state_file(mdir) if mdir is not None else None
        if mdir is None or state is None:
            raise ConfigError(f"RLlib checkpoint {p} holds no module weights")
        run = run_dir_of(mdir)
        return state, (_opt(run / "config.yaml") if run is not None else None), None
    if p.is_dir():
        model = p / "best_model.zip" if (p / "best_model.zip").exists() else p / "model.zip"
        if not model.exists():
            raise ConfigError(f"agent folder {p} holds no model.zip or best_model.zip")
        vn_name = "best_vecnormalize.pkl" if model.name == "best_model.zip" else "vecnormalize.pkl"
        return model, _opt(p / "config.yaml"), _opt(p / vn_name)
    if p.suffix == ".zip" or "/" in text or "\\" in text:
        if not p.exists():
            raise ConfigError(f"agent model {p}: file not found")
        cfg = _opt(p.with_suffix(".yaml")) or _opt(p.parent / "config.yaml")
        if cfg is None and p.parent.name in ("checkpoints", "dagger"):  # inside a run folder
            cfg = _opt(p.parent.parent / "config.yaml")
        # a checkpoint's own statistics (SB3's rl_model_vecnormalize_N_steps.pkl) and
        # best_model.zip's (best_vecnormalize.pkl) before the final model's: was loaded without any
        # (a checkpoint) or with the final ones (best_model.zip)
        # aryl_gym.train imports its config module (pydantic): only when a model file is resolved
        from aryl_gym.train.vecnorm import statistics_path

        return p, cfg, statistics_path(p)
    model = PRETRAINED_DIR / f"{text}.zip"
    if not model.exists():
        known = ", ".join(shipped_agents()) or "none shipped yet"
        raise ConfigError(
            f"unknown agent {text!r}: not a shipped agent ({known}) nor a path to a model .zip or run folder"
        )
    return model, _opt(PRETRAINED_DIR / f"{text}.yaml"), _opt(PRETRAINED_DIR / f"{text}_vecnormalize.pkl")


def _opt(p: Path) -> Path | None:
    return p if p.exists() else None


# ----------------------------------------------------------------------------------------------
# rl-baselines3-zoo folders
# ----------------------------------------------------------------------------------------------

#: the zoo's algorithm names -> this package's (aryl_gym.train.config.ALGOS)
ZOO_ALGOS = {"ppo_mask": "maskable_ppo", "ppo": "ppo", "a2c": "a2c", "dqn": "dqn", "ppo_lstm": "recurrent_ppo"}
_RUN_RE = re.compile(r"^(?P<env>.+)_(?P<id>[0-9]+)$")


def _zoo_yaml(path: Path) -> Any:
    """A zoo ``args.yml`` / ``config.yml``: YAML dumps of ``OrderedDict`` (tagged
    ``!!python/object/apply:collections.OrderedDict``), read safely as plain dicts."""

    class _Loader(yaml.SafeLoader):
        pass

    def _ordered(loader: yaml.SafeLoader, node: yaml.SequenceNode) -> dict[str, Any]:
        pairs = loader.construct_sequence(node, deep=True)
        items = pairs[0] if len(pairs) == 1 and isinstance(pairs[0], list) else pairs
        return {k: v for k, v in items}

    _Loader.add_constructor("tag:yaml.org,2002:python/object/apply:collections.OrderedDict", _ordered)
    try:
        return yaml.load(path.read_text(), Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not a readable rl-zoo3 file ({exc})") from None


def _is_zoo_experiment(p: Path) -> bool:
    return p.is_dir() and any(p.glob("*/args.yml"))


def find_zoo_experiment(folder: str | Path) -> Path | None:
    """The zoo experiment folder ``LOG/ALGO/ENV_N`` that ``folder`` names, or None if ``folder``
    is not a zoo folder. ``folder`` may be the experiment itself, an algorithm folder
    ``LOG/ALGO`` (its latest ``ENV_N``) or the log root ``LOG`` holding one algorithm folder."""
    p = Path(folder)
    if not p.is_dir():
        return None
    if _is_zoo_experiment(p):
        return p
    runs = [d for d in p.iterdir() if _RUN_RE.match(d.name) and _is_zoo_experiment(d)]
    if runs:
        envs = sorted({_RUN_RE.match(d.name).group("env") for d in runs})  # type: ignore[union-attr]
        if len(envs) > 1:
            raise ConfigError(
                f"{p} holds rl-zoo3 experiments of several envs ({', '.join(envs)}); name one "
                f"experiment folder, e.g. {sorted(runs)[-1]}"
            )
        return max(runs, key=lambda d: int(_RUN_RE.match(d.name).group("id")))  # type: ignore[union-attr]
    algos = [d for d in p.iterdir() if d.is_dir() and any(
        _RUN_RE.match(e.name) and _is_zoo_experiment(e) for e in d.iterdir())]
    if len(algos) == 1:
        return find_zoo_experiment(algos[0])
    if len(algos) > 1:
        raise ConfigError(
            f"{p} holds rl-zoo3 runs of several algorithms ({', '.join(sorted(d.name for d in algos))}); "
            "name one, e.g. " + str(sorted(algos)[0])
        )
    return None


def resolve_zoo_folder(folder: str | Path) -> tuple[Path, dict[str, Any], Path | None]:
    """``(model.zip, config, vecnormalize.pkl or None)`` of a zoo experiment folder.

    The zoo writes ``ENV_N/best_model.zip`` (best evaluation, when ``--eval-freq`` ran),
    ``ENV_N/ENV.zip`` (the final model), ``ENV_N/rl_model_STEPS_steps.zip`` (checkpoints) and
    ``ENV_N/ENV/{args.yml, config.yml, vecnormalize.pkl}``. The model is the best one, else the
    final one, else the latest checkpoint; the config (algorithm, env id, env kwargs) comes from
    ``args.yml`` and ``config.yml``."""
    exp = find_zoo_experiment(folder)
    if exp is None:
        raise ConfigError(f"{folder} is not an rl-zoo3 log folder (no */args.yml inside)")
    params = next(d for d in sorted(exp.iterdir()) if (d / "args.yml").exists())
    args = _zoo_yaml(params / "args.yml") or {}
    hyper = _zoo_yaml(params / "config.yml") if (params / "config.yml").exists() else {}
    if not isinstance(args, dict) or not isinstance(hyper or {}, dict):
        raise ConfigError(f"{params}: args.yml / config.yml are not mappings")
    checkpoints = sorted(
        exp.glob("rl_model_*_steps.zip"),
        key=lambda q: int(re.sub(r"\D", "", q.stem) or 0),
    )
    candidates = [exp / "best_model.zip", exp / f"{params.name}.zip", *reversed(checkpoints)]
    model = next((c for c in candidates if c.exists()), None)
    if model is None:
        raise ConfigError(
            f"rl-zoo3 folder {exp} holds no model yet (best_model.zip, {params.name}.zip or "
            "rl_model_*_steps.zip); has the training finished its first evaluation or save?"
        )
    zoo_algo = str(args.get("algo", "ppo_mask"))
    if zoo_algo not in ZOO_ALGOS:
        raise ConfigError(
            f"{params / 'args.yml'}: algo {zoo_algo!r} is not one this package loads "
            f"({', '.join(ZOO_ALGOS)})"
        )
    env_kwargs = dict(args.get("env_kwargs") or (hyper or {}).get("env_kwargs") or {})
    config: dict[str, Any] = {
        "algo": ZOO_ALGOS[zoo_algo],
        "env_id": str(args.get("env") or "aryl_gym/Aryl-v0"),
        "env_kwargs": {k: v for k, v in env_kwargs.items() if k != "scenario"},
        "source": "rl-zoo3",
        "zoo_folder": str(exp),
    }
    if "scenario" in env_kwargs:
        config["scenario"] = env_kwargs["scenario"]
    return model, config, _opt(params / "vecnormalize.pkl")


def _is_maskable(policy: Any) -> bool:
    """A masked actor-critic policy (sb3-contrib's or a subclass, e.g. aryl_gym.train's)."""
    if type(policy).__name__.startswith("Maskable"):
        return True
    try:
        # an optional dependency: its absence is handled here
        from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
    except ImportError:  # pragma: no cover - the train extra is missing
        return False
    return isinstance(policy, MaskableActorCriticPolicy)


@dataclass
class LearnedAgent:
    """An SB3 model as a policy acting through the env (SPEC 3, "Learned")."""

    name: str
    model: Any
    config: Mapping[str, Any] = field(default_factory=dict)
    obs_norm: Any = None  # a VecNormalize (without its venv) or None
    masked: bool = True
    #: run :meth:`masked_argmax` as a TorchScript trace (same kernels, same actions; False: eager)
    trace: bool = True
    #: one observation of a set policy: score it in numpy first (:meth:`_one_argmax`; same actions)
    numpy: bool = True

    @property
    def scenario(self) -> str | None:
        return self.config.get("scenario")

    @property
    def env_id(self) -> str:
        """The env id to act through: the current world's (``-v2``) for an agent trained on an
        earlier one (``-v0``, ``-v1``), whose spaces are the same, so that it plays the episodes
        the reference policies play (the shipped scenarios as they are now). :attr:`trained_on`
        keeps the version it was trained on; pass ``env_id=`` to :meth:`make_env` to act in
        another world (e.g. ``aryl_gym/Aryl-v1`` to reproduce a World v1 result)."""
        env_id = str(self.config.get("env_id", "aryl_gym/Aryl-v2"))
        current = {
            "aryl_gym/Aryl-v0": "aryl_gym/Aryl-v2",
            "aryl_gym/Aryl-v1": "aryl_gym/Aryl-v2",
            "aryl_gym/ArylReclaim-v0": "aryl_gym/ArylReclaim-v2",
            "aryl_gym/ArylReclaim-v1": "aryl_gym/ArylReclaim-v2",
        }
        return current.get(env_id, env_id)

    @property
    def trained_on(self) -> str:
        """The env id in the agent's training config (may be an earlier version)."""
        return str(self.config.get("env_id", "aryl_gym/Aryl-v2"))

    @property
    def env_kwargs(self) -> dict[str, Any]:
        """The env settings the agent acts with: its training ``env_kwargs`` and, on top, its
        ``deploy_env_kwargs`` (e.g. ``flap_damping``; pass ``flap_damping=False`` to
        :meth:`make_env` to play without them)."""
        return {**(self.config.get("env_kwargs", {}) or {}), **(self.config.get("deploy_env_kwargs", {}) or {})}

    def make_env(self, scenario: str | None = None, deployed: bool = True,
                 env_id: str | None = None, **overrides: Any) -> Any:
        """An env like the one the agent was trained on (``scenario`` may differ), through
        ``env_id`` (default :attr:`env_id`, the current world), with its ``deploy_env_kwargs``
        on top unless ``deployed=False``, and ``overrides`` last."""

        base = self.env_kwargs if deployed else dict(self.config.get("env_kwargs", {}) or {})
        kwargs = {**base, **overrides}
        kwargs["scenario"] = scenario or self.scenario or kwargs.get("scenario", "testbed")
        env_id = env_id or self.env_id
        env = gym.make(env_id, **kwargs)
        want = getattr(self.model, "observation_space", None)
        if want is not None and not _same_space(env.observation_space, want):
            env.close()
            raise ConfigError(
                f"agent {self.name!r}: its model expects observations {_describe(want)}, but the env "
                f"built from {'its training config' if self.config else 'default settings (no training config found beside the model)'} "
                f"({env_id}, {({k: v for k, v in kwargs.items() if k != 'scenario'})}) gives "
                f"{_describe(env.observation_space)}. Load the model from its run folder (or keep its "
                "config.yaml beside it), or pass the training env's settings, e.g. "
                "make_env(window=32, observation='v1', allow_preempt=True, action_mode='sequential')"
            )
        return env

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, Any]:
        obs = observation
        own = isinstance(obs, Mapping) and "action_mask" in obs
        # one observation with its own mask (given again, as the rollout loop does, or not):
        # preallocated inputs and the numpy pass; a different mask goes to masked_argmax
        if own and (action_masks is None or _same_mask(action_masks, obs["action_mask"])):
            if self.obs_norm is None and self.masked and deterministic and self._fast_ok():
                act = self._one_argmax(obs)
                if act is not None:
                    return act, state
            if action_masks is None:
                action_masks = np.asarray(obs["action_mask"]) > 0.5
        if self.obs_norm is not None:
            obs = self.obs_norm.normalize_obs(obs)
        if self.masked and deterministic and action_masks is not None and self._fast_ok():
            return self.masked_argmax(obs, action_masks), state
        if self.masked:
            return self.model.predict(
                obs, state=state, episode_start=episode_start, deterministic=deterministic,
                action_masks=action_masks,
            )
        return self.model.predict(obs, state=state, episode_start=episode_start, deterministic=deterministic)

    def _fast_ok(self) -> bool:
        """The direct masked argmax applies: a masked categorical policy over a ``Discrete``
        action space (MaskablePPO's ``sequential`` and ``priority``-free modes)."""
        ok = getattr(self, "_fast", None)
        if ok is None:
            pol = getattr(self.model, "policy", None)
            ok = (
                isinstance(getattr(self.model, "action_space", None), spaces.Discrete)
                and all(hasattr(pol, a) for a in ("action_net", "mlp_extractor", "pi_features_extractor"))
                and _is_maskable(pol)
            )
            self._fast = ok
        return bool(ok)

    def masked_argmax(self, observation: Any, action_masks: np.ndarray) -> np.ndarray:
        """Deterministic masked action with one forward pass of the actor, no distribution
        objects: the same operations, in the same order, as sb3-contrib's
        ``MaskablePPO.predict(obs, action_masks=m, deterministic=True)`` (normalise the logits,
        masked logits to -1e8, normalise again, softmax, argmax: ties go to the lowest action),
        so the action is identical (``tests/test_train.py`` checks this on a batch), at a
        fraction of the cost (about 17 ms per call through SB3's masked distribution code).

        The pass runs as a TorchScript trace of those operations (:func:`_traced_argmax`, one
        per policy and input shapes): the same ATen kernels on the same parameters without
        Python's per-module dispatch, 2-3x faster for the set policy's 25-odd small operations
        (``aryl-gym bench --only scale``); a policy that cannot be traced, or whose trace does
        not give the eager result on its first input, runs eagerly."""
        # torch (the train extra): imported when used
        import torch as th

        pol = self.model.policy
        fast = _float_tensors(pol.observation_space, observation)
        obs_t, vectorized = fast if fast is not None else pol.obs_to_tensor(observation)
        batch = next(iter(obs_t.values())).shape[0] if isinstance(obs_t, dict) else obs_t.shape[0]
        m = th.from_numpy(np.ascontiguousarray(action_masks, dtype=np.bool_)).reshape(batch, -1)
        with th.inference_mode():
            fn = _traced_argmax(self, pol, obs_t, m) if self.trace else None
            act = fn(obs_t, m) if fn is not None else _eager_argmax(pol, obs_t, m)
        out = act.numpy().reshape((-1, *self.model.action_space.shape))
        return out if vectorized else out.squeeze(axis=0)

    def _one_argmax(self, observation: Mapping[str, Any]) -> np.ndarray | None:
        """:meth:`masked_argmax` of one observation with its own ``action_mask`` (``> 0.5``),
        through preallocated input tensors (:class:`_Feed`): the observation is copied into
        them, and the trace takes them as positional arguments (no dict to convert, no tensors
        to create per call). Same operations on the same values as :meth:`masked_argmax`, so the
        same action. None when the observation is not one of the policy's ``Dict`` of float32
        ``Box`` observations (then :meth:`masked_argmax` converts it).

        With :attr:`numpy` (default) a set policy's observation is scored first in numpy
        (:func:`_numpy_argmax`), which keeps its action only when the best allowed logit leads
        the next by a margin far above the two passes' rounding differences; a near tie goes
        to the torch pass, so the action is torch's either way."""
        import torch as th  # torch (the train extra): imported when used

        pol = self.model.policy
        feed = self.__dict__.get("_feed")
        if feed is None or feed.pol is not pol:
            feed = self._feed = _Feed.build(pol, self.model.action_space)
        if feed is None or not feed.fill(observation):
            return None
        if self.numpy:
            act = _numpy_argmax(feed, observation)
            if act is not None:
                return np.array(act, dtype=np.int64).reshape(self.model.action_space.shape)
        with th.inference_mode():
            if self.trace:
                if feed.fn is False:
                    feed.fn = _traced_feed(feed)
                if feed.fn is not None:
                    return feed.fn(*feed.tensors, feed.mask).numpy().reshape(self.model.action_space.shape)
            act = _eager_argmax(pol, dict(zip(feed.keys, feed.tensors)), feed.mask)
        return act.numpy().reshape(self.model.action_space.shape)

    def __repr__(self) -> str:
        return f"LearnedAgent(name={self.name!r}, algo={type(self.model).__name__}, scenario={self.scenario!r})"


def _eager_argmax(pol: Any, obs_t: Any, m: Any) -> Any:
    """The masked argmax of :meth:`LearnedAgent.masked_argmax`, op by op (torch tensors in and
    out; ``m`` is the boolean mask shaped like the logits)."""
    import torch as th  # torch: the learned-agent parts only (the train extra)

    features = pol.extract_features(obs_t, pol.pi_features_extractor)
    logits = pol.action_net(pol.mlp_extractor.forward_actor(features))
    logits = logits - logits.logsumexp(dim=-1, keepdim=True)
    logits = th.where(m, logits, th.tensor(-1e8, dtype=logits.dtype))
    logits = logits - logits.logsumexp(dim=-1, keepdim=True)
    return th.argmax(th.softmax(logits, dim=-1), dim=1)


#: traces kept per agent (policy and input shapes: a batch size or window is one entry each)
_TRACE_CACHE = 16


def _traced_argmax(agent: LearnedAgent, pol: Any, obs_t: Any, m: Any) -> Any:
    """A TorchScript trace of :func:`_eager_argmax` for ``pol`` at these input shapes, cached on
    ``agent``; None when the policy cannot be traced or the trace disagrees with the eager
    pass on the tracing input (then the caller runs eagerly; remembered per shape). The trace
    holds the policy's own parameter tensors, so in-place updates (training) reach it."""
    import torch as th  # torch: the learned-agent parts only (the train extra)

    shapes = tuple((k, tuple(v.shape)) for k, v in obs_t.items()) if isinstance(obs_t, dict) else tuple(obs_t.shape)
    key = (id(pol), shapes, tuple(m.shape))
    cache: dict[Any, Any] = agent.__dict__.setdefault("_traces", {})
    if key in cache:
        return cache[key]

    class _Argmax(th.nn.Module):
        def __init__(self, policy: Any):
            super().__init__()
            self.policy = policy

        def forward(self, obs: Any, mask: Any) -> Any:
            return _eager_argmax(self.policy, obs, mask)

    fn = _checked_trace(_Argmax(pol), (obs_t, m), lambda: _eager_argmax(pol, obs_t, m))
    if len(cache) >= _TRACE_CACHE:
        cache.pop(next(iter(cache)))
    cache[key] = fn
    return fn


class _Feed:
    """Preallocated inputs of the masked argmax for one observation of a policy whose
    observation space is a ``Dict`` of float32 ``Box`` spaces with an ``action_mask`` of one
    entry per ``Discrete`` action: a float32 tensor per key shaped ``(1, *shape)`` (what SB3's
    ``obs_to_tensor`` gives for one observation) and the boolean mask ``(1, n)``, with numpy
    views to copy into. ``fn``: the trace taking them positionally (False: not traced yet;
    None: cannot be traced, run eagerly)."""

    def __init__(self, pol: Any, sub: Mapping[str, Any], n: int):
        import torch as th  # torch: the learned-agent parts only (the train extra)

        self.pol = pol
        self.keys = list(sub)
        self.tensors = [th.zeros((1, *sub[k].shape), dtype=th.float32) for k in self.keys]
        self.rows = [(k, tuple(sub[k].shape), t.numpy()[0]) for k, t in zip(self.keys, self.tensors)]
        self.mask = th.zeros((1, n), dtype=th.bool)
        self.mask_np = self.mask.numpy()[0]
        self.fn: Any = False
        #: the set policy's numpy actor (False: not built yet; None: the policy has none)
        self.np_actor: Any = False

    @classmethod
    def build(cls, pol: Any, action_space: Any) -> _Feed | None:
        sub = getattr(pol.observation_space, "spaces", None)
        if sub is None or not isinstance(action_space, spaces.Discrete):
            return None
        if not all(isinstance(sp, spaces.Box) and sp.dtype == np.float32 for sp in sub.values()):
            return None
        n = int(action_space.n)
        if "action_mask" not in sub or tuple(sub["action_mask"].shape) != (n,):
            return None
        return cls(pol, sub, n)

    def fill(self, observation: Mapping[str, Any]) -> bool:
        """Copy ``observation`` in (False, nothing meant, when it does not fit the space)."""
        if len(observation) != len(self.rows):
            return False
        for k, shape, buf in self.rows:
            a = observation.get(k)
            if type(a) is not np.ndarray or a.shape != shape or a.dtype != np.float32:
                return False
            buf[...] = a
        np.greater(observation["action_mask"], 0.5, out=self.mask_np)
        return True


#: the numpy pass decides only when the best allowed logit leads the next by more than this
#: (times ``max(1, |best|)``): about 40x the largest difference between the numpy and torch
#: logits of ``ppo-v1`` seen over 5,000 ``basic`` states (2.4e-6); a closer call goes to torch
NUMPY_MARGIN = 1e-4


def _numpy_argmax(feed: _Feed, observation: Mapping[str, Any]) -> int | None:
    """The masked argmax of one observation (already checked by ``feed.fill``) from the
    policy's numpy actor (its ``numpy_actor()``: a set policy's
    :class:`aryl_gym.train.setpolicy.NumpyActor`), or None (the caller runs the torch pass)
    when the policy has none, no action is allowed, a logit is not finite, or the best allowed
    logit is within :data:`NUMPY_MARGIN` of the next. Outside a near tie the argmax of the
    logits is the argmax of sb3-contrib's normalised masked softmax (both normalisations
    subtract one constant; the softmax is increasing), so the action is the torch pass's."""
    actor = feed.np_actor
    if actor is False:  # asked of the policy (a set policy has one): no import of its module here
        make = getattr(feed.pol, "numpy_actor", None)
        actor = feed.np_actor = make() if callable(make) else None
    if actor is None:
        return None
    logits = actor.logits(observation, observation["action_mask"])
    scores = np.where(feed.mask_np, logits, -np.inf)
    best = int(scores.argmax())
    top = float(scores[best])
    if not np.isfinite(top):  # nothing allowed, or a NaN
        return None
    scores[best] = -np.inf
    second = float(scores.max())
    if not top - second > NUMPY_MARGIN * max(1.0, abs(top)):  # also False for a NaN
        return None
    return best


def _traced_feed(feed: _Feed) -> Any:
    """The ``forward`` of a TorchScript trace of :func:`_eager_argmax` taking ``feed``'s
    tensors and mask as positional arguments, frozen (``torch.jit.freeze(optimize_numerics=False)``: the parameter
    lookups inlined, the policy's own tensors kept, so in-place updates still reach it; only
    passes that preserve numerics; about 5% less CPU per call than the plain trace); None when
    it cannot be traced or disagrees with the eager pass on the current input (as
    :func:`_traced_argmax`)."""
    import torch as th  # torch: the learned-agent parts only (the train extra)

    keys = feed.keys

    class _Argmax(th.nn.Module):
        def __init__(self, policy: Any):
            super().__init__()
            self.policy = policy

        def forward(self, *args: Any) -> Any:
            return _eager_argmax(self.policy, dict(zip(keys, args[:-1])), args[-1])

    fn = _checked_trace(_Argmax(feed.pol), (*feed.tensors, feed.mask),
                        lambda: _eager_argmax(feed.pol, dict(zip(keys, feed.tensors)), feed.mask), freeze=True)
    # its forward method itself: no nn.Module call machinery per step (about 3% less CPU per
    # predict, measured as for the freeze)
    return None if fn is None else fn.forward


def _checked_trace(module: Any, args: tuple[Any, ...], eager: Callable[[], Any], freeze: bool = False) -> Any:
    """A TorchScript trace of ``module`` on ``args`` (frozen with numerics kept when
    ``freeze``), or None when tracing fails or its result differs from ``eager()``."""
    import torch as th  # torch: the learned-agent parts only (the train extra)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TracerWarnings on shape-dependent Python branches
            fn = th.jit.trace(module, args, strict=False, check_trace=False)
            if freeze:
                fn = th.jit.freeze(fn.eval(), optimize_numerics=False)
        return fn if th.equal(fn(*args), eager()) else None
    except Exception:  # noqa: BLE001 - any tracing failure: run eagerly
        return None


def _same_mask(given: Any, own: Any) -> bool:
    """``given`` (action masks passed to ``predict``) is the observation's own ``action_mask``
    (``> 0.5``), of the same shape."""
    g, o = np.asarray(given), np.asarray(own)
    return g.shape == o.shape and bool(np.array_equal(g.astype(bool, copy=False), o > 0.5))


def _float_tensors(space: Any, observation: Any) -> tuple[Any, bool] | None:
    """``(tensors, vectorized)`` as SB3's ``policy.obs_to_tensor`` gives them for a ``Dict`` of
    float32 ``Box`` observations given as float32 arrays (the allocation env's), without its
    copies: the same values (SB3 reshapes each key to ``(-1, *shape)`` and its preprocessing
    casts a ``Box`` to float32); None for anything else (then SB3 converts)."""
    import torch as th  # torch: the learned-agent parts only (the train extra)

    sub = getattr(space, "spaces", None)
    if sub is None or not isinstance(observation, Mapping) or set(observation) != set(sub):
        return None
    out = {}
    vectorized = None
    for k, sp in sub.items():
        a = observation[k]
        if not isinstance(a, np.ndarray) or a.dtype != np.float32 or sp.dtype != np.float32:
            return None
        if a.shape == sp.shape:
            vec = False
        elif a.shape[1:] == sp.shape:
            vec = True
        else:
            return None
        if vectorized is not None and vec != vectorized:
            return None
        vectorized = vec
        out[k] = th.from_numpy(np.ascontiguousarray(a)).reshape((-1, *sp.shape))
    return out, bool(vectorized)


def _same_space(a: Any, b: Any) -> bool:
    """Observation spaces match in keys, shapes and dtypes (bounds may differ in float detail)."""
    sa, sb = getattr(a, "spaces", None), getattr(b, "spaces", None)
    if sa is not None or sb is not None:
        return sa is not None and sb is not None and set(sa) == set(sb) and all(
            _same_space(sa[k], sb[k]) for k in sa)
    return getattr(a, "shape", None) == getattr(b, "shape", None) and getattr(a, "dtype", None) == getattr(b, "dtype", None)


def _describe(space: Any) -> str:
    spaces = getattr(space, "spaces", None)
    if spaces is not None:
        return "{" + ", ".join(f"{k}: {tuple(v.shape)}" for k, v in spaces.items()) + "}"
    return str(tuple(getattr(space, "shape", ()) or ()))


def one_torch_thread() -> None:
    """Run torch on one intra-op thread in this process. An agent acting through the env asks
    for one observation at a time, which one thread serves fastest; with more, on a machine
    whose cores are busy, torch's idle worker threads spin and one forward pass of ``ppo-v1``
    took 26 ms of CPU instead of 0.23 ms here (2 threads, 2 busy cores). The shipped agents
    trained and evaluated with ``torch_threads: 1``."""
    import torch  # torch: the learned-agent parts only (the train extra)

    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)


def _read_run_config(path: Path) -> dict[str, Any]:
    """A run's training config beside its model; damaged (not YAML, empty, not a mapping, a
    mapping of the wrong shape) is a ConfigError naming the file, not a traceback."""
    # fileio has no heavy imports; imported where it is used
    from aryl_gym.fileio import load_yaml_file

    data = load_yaml_file(path, "training config")
    fix = ("restore it from the run (or delete it to load the model with default env settings, "
           "which must then match the model)")
    if data is None:
        raise ConfigError(f"{path}: the training config is empty; {fix}")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a training config (a YAML mapping with algo, env_id, "
                          f"env_kwargs, ...; found a {type(data).__name__}); {fix}")
    for k in ("env_kwargs", "deploy_env_kwargs", "policy_kwargs"):
        if data.get(k) is not None and not isinstance(data[k], dict):
            raise ConfigError(f"{path}: {k} must be a mapping, found {data[k]!r}; {fix}")
    for k in ("algo", "env_id"):
        if data.get(k) is not None and not isinstance(data[k], str):
            raise ConfigError(f"{path}: {k} must be a name, found {data[k]!r}; {fix}")
    return data


def load_agent(name_or_path: str | Path, env: Any = None) -> LearnedAgent:
    """Load a shipped agent by name (``ppo-testbed``) or a model/run folder by path.

    ``env`` (optional) is attached to the model (needed only to continue training it).
    Loading sets torch to one thread in this process (:func:`one_torch_thread`): a loaded
    agent is for acting, one observation at a time; training sets its own ``torch_threads``.
    """

    if is_rllib_source(name_or_path):
        # an RLlib run folder or checkpoint (aryl-gym train --backend rllib): ray and torch
        return load_rllib_agent(name_or_path)

    one_torch_thread()

    zoo = find_zoo_experiment(name_or_path) if Path(str(name_or_path)).is_dir() else None
    config: dict[str, Any] = {}
    cfg_path: Path | None
    if zoo is not None:
        model_path, config, vn_path = resolve_zoo_folder(zoo)
        cfg_path = zoo
    else:
        model_path, cfg_path, vn_path = resolve_agent_path(name_or_path)
        if cfg_path is not None:
            config = _read_run_config(cfg_path)
    algo = str(config.get("algo", "")) or None
    # config imports pydantic: only when a config is validated
    from aryl_gym.train.config import ALGOS, algo_class

    candidates = [algo] if algo else ["maskable_ppo", "ppo"]
    model = None
    errors = []
    for a in candidates:
        if a not in ALGOS:
            raise ConfigError(f"{cfg_path}: unknown algo {a!r}")
        try:
            cls: Any = algo_class(a)
            model = cls.load(str(model_path), env=env, device="cpu")
            algo = a
            break
        except (ValueError, KeyError, RuntimeError, TypeError) as exc:  # wrong class for this zip
            # TypeError too: was a traceback when the config's algo (edited, or another run's
            # config) is not the zip's, e.g. PPO building a MaskablePPO zip's policy ("unexpected
            # keyword argument 'use_sde'")
            errors.append(f"{a}: {exc}")
    if model is None or algo is None:
        said = (f"; its config {cfg_path} says algo: {config['algo']}, which may not be the algorithm that "
                "saved it: restore the config from the run, or delete it to try maskable_ppo and ppo"
                if config.get("algo") else "")
        raise ConfigError(f"cannot load {model_path} as an SB3 model: {'; '.join(errors)}{said}")
    obs_norm = None
    if vn_path is None and config.get("normalize_obs"):
        # was: loaded without them, the policy acting on raw observations
        raise ConfigError(f"{model_path}: its training config {cfg_path} normalises observations "
                          "(normalize_obs), but no VecNormalize statistics were found beside the model "
                          "(vecnormalize.pkl, best_vecnormalize.pkl or rl_model_vecnormalize_N_steps.pkl); "
                          "restore them from the run")
    if vn_path is not None:
        # aryl_gym.train imports its config module (pydantic): only when an agent is loaded
        from aryl_gym.train.vecnorm import read_statistics

        try:  # was: an unpickling message naming no file, or an AttributeError at the first step
            obs_norm = read_statistics(vn_path)
        except ValueError as exc:
            raise ConfigError(f"{vn_path}: the agent's VecNormalize statistics {exc}; restore the file "
                              "from the run") from None
        obs_norm.training = False
    name = Path(str(name_or_path)).stem if Path(str(name_or_path)).suffix else Path(str(name_or_path)).name
    return LearnedAgent(name=name, model=model, config=config, obs_norm=obs_norm, masked=ALGOS[algo][2])


# ----------------------------------------------------------------------------------------------
# RLlib runs (aryl-gym train --backend rllib, aryl_gym.train.rllib_backend)
# ----------------------------------------------------------------------------------------------

#: the file that marks a run folder as an RLlib run (and says what made it)
RLLIB_MARKER = "rllib.json"
#: where an RLlib Algorithm checkpoint keeps the policy's RLModule
MODULE_IN_CHECKPOINT = Path("learner_group") / "learner" / "rl_module" / "default_policy"


class RLlibAgent(LearnedAgent):
    """A trained :class:`~aryl_gym.train.rllib_module.MaskedPPOTorchModule` (RLlib) as an SB3-style
    agent: ``predict(obs, state, episode_start, deterministic, action_masks)``. Deterministic:
    the argmax of the masked logits (ties to the lowest action), the mask from ``action_masks``
    when given, else from the observation's ``action_mask``; otherwise a sample of the masked
    softmax from the agent's own seeded generator. ``make_env`` builds the training env (the
    run's ``config.yaml``) as for SB3 agents."""

    def __init__(self, name: str, module: Any, config: Mapping[str, Any] | None = None,
                 seed: int = 0):
        super().__init__(name=name, model=module, config=dict(config or {}), masked=True)
        self.rng = np.random.default_rng(seed)

    def logits(self, observation: Mapping[str, Any], action_masks: Any = None) -> tuple[np.ndarray, bool]:
        """``(masked logits (B, n), batched?)`` for one observation or a batch of them."""
        import torch  # the rllib extra: only when an RLlib agent acts

        # imports ray: only when an RLlib agent acts
        from aryl_gym.train.rllib_module import MASK_KEY, apply_mask

        mod = self.model
        space = mod.observation_space.spaces
        first = np.asarray(observation[MASK_KEY])
        batched = first.ndim == len(space[MASK_KEY].shape) + 1
        obs = {k: torch.as_tensor(np.asarray(observation[k], dtype=np.float32)).reshape(-1, *space[k].shape)
               for k in mod.obs_keys}
        with torch.inference_mode():
            logits, _ = mod.masked_logits(obs)
            if action_masks is not None:
                m = torch.as_tensor(np.asarray(action_masks, dtype=np.float32)).reshape(logits.shape)
                logits = apply_mask(logits, m)
        return logits.numpy(), batched

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None,
                deterministic: bool = True, action_masks: Any = None) -> tuple[Any, Any]:
        logits, batched = self.logits(observation, action_masks)
        if deterministic:
            act = logits.argmax(axis=-1)
        else:
            z = logits - logits.max(axis=-1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(axis=-1, keepdims=True)
            act = np.array([self.rng.choice(len(row), p=row) for row in p])
        return (act if batched else act[0]), state

    def __repr__(self) -> str:
        return f"RLlibAgent(name={self.name!r}, scenario={self.scenario!r})"


def rllib_module_dir(path: str | Path) -> Path | None:
    """The RLModule checkpoint folder that ``path`` names, or ``None`` when ``path`` is not an
    RLlib source (file tests only, no import): an RLlib run folder (``rllib.json``: its
    ``best_module/``, else ``module/``, else its latest checkpoint's module), an Algorithm
    checkpoint (``rllib_checkpoint.json`` and ``learner_group/``) or an RLModule checkpoint
    (``class_and_ctor_args.pkl`` and ``module_state*``)."""
    p = Path(path)
    if not p.is_dir():
        return None
    if (p / RLLIB_MARKER).is_file():
        for d in (p / "best_module", p / "module"):
            if _is_module_dir(d):
                return d
        cks = rllib_checkpoints(p)
        if cks:
            return cks[-1][1] / MODULE_IN_CHECKPOINT
        raise ConfigError(f"RLlib run {p} holds no module yet (best_module/, module/ or "
                          "checkpoints/rllib_N_steps/); has it saved a checkpoint?")
    if (p / "rllib_checkpoint.json").is_file() and (p / "learner_group").is_dir():
        return p / MODULE_IN_CHECKPOINT
    if _is_module_dir(p):
        return p
    return None


def _is_module_dir(d: Path) -> bool:
    return (d / "class_and_ctor_args.pkl").is_file() and any(d.glob("module_state*"))


def module_state_file(module_dir: Path) -> Path | None:
    """The weights file of an RLModule checkpoint (its bytes identify the agent)."""
    return next(iter(sorted(module_dir.glob("module_state*"))), None)


def run_dir_of(module_dir: Path) -> Path | None:
    """The RLlib run folder holding ``module_dir`` (it has ``rllib.json``), if any."""
    for d in [module_dir, *module_dir.parents][:8]:
        if (d / RLLIB_MARKER).is_file():
            return d
    return None


def load_rllib_agent(path: str | Path, seed: int = 0) -> RLlibAgent:
    """The agent of an RLlib run folder or checkpoint (:func:`rllib_module_dir`); its env
    settings from the run's ``config.yaml`` when the checkpoint sits in a run folder."""
    mdir = rllib_module_dir(path)
    if mdir is None:
        raise ConfigError(f"{path}: not an RLlib run folder or checkpoint")
    if not _is_module_dir(mdir):
        raise ConfigError(f"{path}: the RLlib checkpoint has no module at {mdir}")
    # extras imports nothing heavy at import
    from aryl_gym.extras import rllib_unavailable

    why = rllib_unavailable()
    if why:
        raise ConfigError(why)  # names the rllib extra (a bare ModuleNotFoundError would name ray's)
    # ray (the rllib extra): only when an RLlib agent is loaded; no Ray instance is started
    from ray.rllib.core.rl_module.rl_module import RLModule

    one_torch_thread()
    # absolute: RLlib hands the path to pyarrow's filesystem, which refuses a relative one
    # ("URI has empty scheme"), so --agent NAME=runs/RUN failed to load
    module: Any = RLModule.from_checkpoint(str(Path(mdir).absolute()))
    module.eval()  # a TorchRLModule (torch.nn.Module): inference mode
    run = run_dir_of(mdir)
    config: dict[str, Any] = {}
    if run is not None and (run / "config.yaml").is_file():
        config = _read_run_config(run / "config.yaml")
    name = (run or Path(path)).name
    return RLlibAgent(name, module, config, seed)



def rllib_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """``(steps, folder)`` of an RLlib run's ``checkpoints/rllib_{N}_steps``, by steps."""
    out = []
    for d in (run_dir / "checkpoints").glob("rllib_*_steps"):
        try:
            out.append((int(d.name.split("_")[1]), d))
        except ValueError:
            continue
    return sorted(out)
