"""Batched vector envs: N allocation envs stepped in one process, stacked arrays.

``gym.make_vec("aryl_gym/Aryl-v2", num_envs=N, **env_kwargs)`` (no ``vectorization_mode``, or
``"vector_entry_point"``) gives an :class:`ArylVectorEnv`: N simulators stepped one after the
other in this process, observations written straight into stacked arrays (masks included:
``obs["action_mask"]`` is ``(N, mask size)``), rewards, terminations and truncations as arrays,
and infos in Gymnasium's vector format (``info[key]`` an array over envs, ``info["_" + key]``
which envs have it). It returns exactly what Gymnasium's ``SyncVectorEnv`` over N
``gym.make`` envs returns, step for step (``tests/test_vector.py``), with less overhead: no
wrappers, no per-env observation dicts concatenated afterwards, infos merged key by key.
``gym.make_vec(..., num_envs=N, workers=W)`` (``W >= 2``) gives an :class:`ArylAsyncVectorEnv`:
the N envs split over W worker processes, observations in shared memory.

**Autoreset** (``autoreset_mode``, Gymnasium's ``AutoresetMode``): ``"next_step"`` (default, as
``SyncVectorEnv``): the step that ends an episode returns its last observation; the next step
resets that env (its action is ignored) and returns the first observation of a new episode with
reward 0 and both flags False. ``"same_step"``: the ending step resets at once and returns the
new episode's first observation; the last one and the last info are in
``info["final_obs"]`` / ``info["final_info"]``. ``"disabled"``: call
``reset(options={"reset_mask": mask})`` yourself.

**Seeds**: ``reset(seed=s)`` seeds env ``i`` with ``s + i`` (a list or 1-D array seeds each
env), as ``SyncVectorEnv``; every seed is checked (an integer >= 0 or None) before any env is
reset; ``options`` go to every env.

**Not applied**: ``max_episode_steps`` (Gymnasium's ``TimeLimit``) is a ValueError: pass the
env's ``max_steps``. After ``close()``, ``step``/``reset``/``render``/``action_masks`` and
``call``/``get_attr``/``set_attr`` raise Gymnasium's ``ClosedEnvironmentError`` (both classes).

**Actions**: one per env (:func:`batch_actions`, both classes, the same messages): an array of
shape ``(num_envs, *single_action_space.shape)`` or a list of ``num_envs`` actions of one shape.

**Masks**: ``action_masks()`` returns the stacked boolean masks ``(N, mask size)`` for
MaskablePPO-style agents; ``obs["action_mask"]`` has them as float32.

:func:`sb3_vec_env` wraps either class as a stable-baselines3 ``VecEnv`` (SB3 resets a finished
env in the same step and puts its last observation in ``infos[i]["terminal_observation"]``).

The vector entry point is registered for every allocation id of
:mod:`aryl_gym.envs` (:func:`make_vector`, bound to its id), so a new ``-vN`` id gets it by its
one entry in the registration table.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import time
import traceback
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from multiprocessing import shared_memory
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import load_env_creator, registry
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from aryl_gym.envs.options import is_int

#: the most envs one vector env accepts (each holds a simulator)
MAX_ENVS = 4096


def check_num_envs(num_envs: object, name: str = "num_envs") -> int:
    """``num_envs`` as an int in ``1..MAX_ENVS``; anything else is a ValueError naming it."""
    if isinstance(num_envs, (bool, np.bool_)) or not isinstance(num_envs, (int, np.integer)):
        raise ValueError(f"{name} must be a whole number >= 1, got {num_envs!r} ({type(num_envs).__name__})")
    if not 1 <= int(num_envs) <= MAX_ENVS:
        raise ValueError(f"{name} must be between 1 and {MAX_ENVS}, got {num_envs}")
    return int(num_envs)


def _autoreset(mode: object) -> AutoresetMode:
    if isinstance(mode, AutoresetMode):
        return mode
    names = {"next_step": AutoresetMode.NEXT_STEP, "same_step": AutoresetMode.SAME_STEP,
             "disabled": AutoresetMode.DISABLED}
    if isinstance(mode, str):
        if mode.lower() in names:
            return names[mode.lower()]
        try:
            return AutoresetMode(mode)
        except ValueError:
            pass
    raise ValueError(f"autoreset_mode must be one of {', '.join(names)} (or a gymnasium AutoresetMode), got {mode!r}")


def _seeds(seed: int | Sequence[int | None] | np.ndarray | None, n: int) -> list[int | None]:
    """One seed per env (``s + i`` for an int ``s``), every one checked before any env is reset
    (was: a negative or float seed reset the envs before it, then Gymnasium's error)."""
    if seed is None:
        return [None] * n
    if is_int(seed):
        s0 = int(seed)  # type: ignore[arg-type]
        if s0 < 0:
            raise ValueError(f"seed must be an integer >= 0 (env i gets seed + i), got {seed}")
        return [s0 + i for i in range(n)]
    if isinstance(seed, np.ndarray) and seed.ndim == 1:  # was: rejected (SyncVectorEnv takes it)
        seed = seed.tolist()
    if isinstance(seed, (str, bytes)) or not isinstance(seed, Sequence) or len(seed) != n:
        raise ValueError(f"seed must be an int, None or a list of {n} seeds (one per env), got {seed!r}")
    for i, s in enumerate(seed):
        if s is not None and (not is_int(s) or int(s) < 0):
            raise ValueError(f"seed[{i}] must be an integer >= 0 or None, got {s!r} ({type(s).__name__})")
    return [None if s is None else int(s) for s in seed]


def _check_options(options: object) -> None:
    # was: a str became dict("x")'s "dictionary update sequence" error (sync) or an
    # AttributeError (async)
    if options is not None and not isinstance(options, dict):
        raise ValueError(f"reset(options=...) must be a dict or None, got {type(options).__name__}")


def _no_time_limit(kwargs: dict[str, Any]) -> None:
    """``max_episode_steps`` (Gymnasium's ``TimeLimit``, which ``gym.make_vec`` passes on when
    given) is not applied here: say so instead of running without it (was: dropped silently)."""
    steps = kwargs.pop("max_episode_steps", None)
    if steps is not None:
        raise ValueError(
            f"max_episode_steps={steps!r} (Gymnasium's TimeLimit) is not applied by the batched vector "
            "env: pass max_steps=N (the env truncates after N steps, with its episode_result), or "
            "vectorization_mode='sync' for a TimeLimit around each gym.make env"
        )


def check_timeout(timeout: object) -> float | None:
    """``timeout`` (seconds an :class:`ArylAsyncVectorEnv` call waits for its workers) as a
    positive float, or None (wait as long as the workers take)."""
    if timeout is None:
        return None
    if isinstance(timeout, (bool, np.bool_)) or not isinstance(timeout, (int, float, np.integer, np.floating)) \
            or not 0 < float(timeout) < float("inf"):
        raise ValueError(f"timeout must be a number of seconds > 0 or None, got {timeout!r}")
    return float(timeout)


def _check_none_ended(ended: np.ndarray) -> None:
    """``autoreset_mode="disabled"``: no env that has ended may step before it is reset."""
    if ended.any():
        raise RuntimeError(f"env {int(np.flatnonzero(ended)[0])} has ended: reset it "
                           "(options={'reset_mask': ...}) before stepping")


def batch_actions(actions: Any, n: int, single_space: gym.Space) -> Any:
    """``actions`` checked as one action per env (both vector envs, the same messages): an
    array whose first axis has ``n`` entries (returned as it is), or a sequence of ``n`` actions
    of one shape (returned as a list, each env's action untouched). Anything else is a
    ValueError naming the expected shape ``(n, *single_space.shape)``: a scalar, None, a string,
    a dict or a set, a wrong number of actions, or a ragged list (actions of different shapes;
    was: the batched env stepped each as its env's own, usually invalid, action, the subprocess
    variant raised numpy's "inhomogeneous shape" error). Each env's action is still checked by
    its env (a wrong one is that env's counted no-op). An array is taken along its first axis:
    for ``num_envs == K`` a transposed ``(K, num_envs)`` batch cannot be told from
    ``(num_envs, K)``; Gymnasium's convention (``batch_space``) is env first."""
    shape = (n, *(single_space.shape or ()))
    expected = f"expected {n} actions, one per env (an array of shape {shape}, or a list of {n} actions of one shape)"
    if isinstance(actions, np.ndarray):
        if actions.ndim >= 1 and actions.shape[0] == n:
            return actions
        raise ValueError(f"{expected}, got an array of shape {actions.shape}")
    a: list[Any] | None = None
    if actions is not None and not isinstance(actions, (str, bytes, Mapping, AbstractSet, np.generic)):
        try:
            a = list(actions)
        except TypeError:
            pass
    if a is None:
        raise ValueError(f"{expected}, got {type(actions).__name__} {actions!r:.80}")
    if len(a) != n:
        raise ValueError(f"{expected}, got {len(a)} actions")
    try:
        shapes = {np.shape(x) for x in a}
    except ValueError:  # an action that is itself ragged
        shapes = set()
    if len(shapes) != 1:
        raise ValueError(f"{expected}, got a ragged list (actions of different shapes): {actions!r:.80}")
    return a


def _check_open(venv: VectorEnv) -> None:
    if venv.closed:  # was: stepped on (sync), a BrokenPipeError or a segfault on freed memory (async)
        raise gym.error.ClosedEnvironmentError(
            f"{type(venv).__name__} is closed: make a new one (gym.make_vec) to go on"
        )


def _single_env_class(env_id: str) -> Any:
    """The class behind a registered id (its entry point)."""
    import aryl_gym  # noqa: F401  (registers the envs)

    spec = gym.spec(env_id)
    ep = spec.entry_point
    if ep is None:
        raise ValueError(f"env id {env_id!r} has no entry point")
    return ep if callable(ep) else load_env_creator(ep)


class _InfoMerger:
    """Gymnasium's vector-info format (``VectorEnv._add_info``: per key an array over the envs
    and a ``_key`` mask, dicts recursively, ``final_obs`` as an object array), built key by key
    over the envs' infos at once instead of env by env."""

    def __init__(self, num_envs: int):
        self.n = num_envs

    def merge(self, infos: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
        n = self.n
        # the envs grouped by their infos' keys (a step has one or two groups: infos with and
        # without the keys of a commit or an episode's end), so that which envs have a key is
        # known per group, not looked up env by env
        groups: dict[tuple[str, ...], list[int]] = {}
        for i, inf in enumerate(infos):
            if inf:
                kt = tuple(inf)
                g = groups.get(kt)
                if g is None:
                    groups[kt] = [i]
                else:
                    g.append(i)
        keys: dict[str, None] = {}
        for kt in groups:  # first-seen order, as env-by-env merging gives
            keys.update(dict.fromkeys(kt))
        sets = [(frozenset(kt), idx) for kt, idx in groups.items()]
        # the keys every env has (none when an env has no info)
        common = frozenset.intersection(*[ks for ks, _ in sets]) if (
            sets and sum(len(idx) for _, idx in sets) == n) else frozenset()
        full = np.ones((len(keys), n), dtype=np.bool_)  # the masks of keys every env has (rows)
        out: dict[str, Any] = {}
        for r, key in enumerate(keys):
            have: list[int] | None = None
            if key not in common:
                have = sorted([i for ks, idx in sets if key in ks for i in idx])
            if have is None:
                values = [inf[key] for inf in infos]  # type: ignore[index]
            else:
                values = [infos[i][key] for i in have]  # type: ignore[index]
            first = values[0]
            if key == "final_obs":
                arr: Any = np.full(n, None, dtype=object)
                for i, v in zip(have if have is not None else range(n), values):
                    arr[i] = v
            elif isinstance(first, dict):
                if have is None:
                    sub: list[dict[str, Any] | None] = values
                else:
                    sub = [None] * n
                    for i, v in zip(have, values):
                        sub[i] = v
                arr = self.merge(sub)
            else:
                arr = self._array(first, values, have)
            if have is None:
                mask = full[r]
            else:
                mask = np.zeros(n, dtype=np.bool_)
                mask[have] = True
            out[key], out[f"_{key}"] = arr, mask
        return out

    def _array(self, first: Any, values: list[Any], where: list[int] | None) -> np.ndarray:
        """The array of one key's ``values`` (the envs in ``where``, every env when None), of
        the type of the first env's value, as Gymnasium's ``VectorEnv._add_info`` builds it."""
        n = self.n
        t = type(first)
        if t is float or t is int or t is bool or issubclass(t, np.number):
            arr = np.zeros(n, dtype=t)
        elif isinstance(first, np.ndarray):
            arr = np.zeros((n, *first.shape), dtype=first.dtype)
        else:
            arr = np.full(n, None, dtype=object)
        if where is None and arr.dtype != object:
            arr[:] = values
        else:
            for i, v in zip(where if where is not None else range(n), values):
                arr[i] = v
        return arr


def _check_scalar_reward(env: Any, env_id: str) -> None:
    """The vector envs return one float reward per env: an env with a vector reward (the
    multi-objective view, which has a ``reward_space``) is refused (was: its rewards came out as
    the scalar reward, since the batched step bypasses the view's ``step``)."""
    if getattr(env, "reward_space", None) is not None:
        raise ValueError(
            f"{env_id!r} has a vector reward (reward_space {env.reward_space}); the batched vector env "
            "returns one float reward per env: use MO-Gymnasium's vector env, e.g. "
            "mo_gymnasium.wrappers.vector.MOSyncVectorEnv([lambda: gym.make(id, **kwargs)] * num_envs)"
        )


def _world_of(env_id: str, kwargs: dict[str, Any]) -> None:
    """Give ``kwargs`` the world version ``env_id`` is registered with (``-v1``: World v1),
    unless the caller chose one: built directly, the vector env draws the same episodes as
    ``gym.make(env_id)``."""
    spec = registry.get(env_id)
    world = (spec.kwargs or {}).get("world_version") if spec is not None else None
    if world is not None:
        kwargs.setdefault("world_version", world)


class ArylVectorEnv(VectorEnv):
    """N allocation envs in one process with stacked arrays (module docstring).

    Args:
        num_envs: how many envs (1..4096).
        env_id: the registered id whose env class to batch (``make_vector`` binds it).
        autoreset_mode: ``"next_step"`` (default), ``"same_step"`` or ``"disabled"``.
        **kwargs: the env's own arguments (``scenario``, ``action_mode``, ``window``, ...),
            the same for every env.
    """

    def __init__(self, num_envs: int = 1, env_id: str = "aryl_gym/Aryl-v2",
                 autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP, **kwargs: Any):
        n = check_num_envs(num_envs)
        _world_of(env_id, kwargs)
        self.autoreset_mode = _autoreset(autoreset_mode)
        _no_time_limit(kwargs)
        cls = _single_env_class(env_id)
        self.env_id = env_id
        self.env_kwargs = dict(kwargs)
        e0 = cls(**kwargs)
        _check_scalar_reward(e0, env_id)
        self.envs = [e0] + [cls(**kwargs) for _ in range(n - 1)]
        self.num_envs = n
        self.single_observation_space = e0.observation_space
        self.single_action_space = e0.action_space
        self.observation_space = batch_space(e0.observation_space, n)
        self.action_space = batch_space(e0.action_space, n)
        self.metadata = dict(e0.metadata)
        self.metadata["autoreset_mode"] = self.autoreset_mode
        self.render_mode = e0.render_mode
        self.spec = None
        self._keys = tuple(getattr(e0, "_obs_keys", tuple(e0.observation_space.spaces)))
        self._rows = hasattr(e0, "_write_obs")
        self._merger = _InfoMerger(n)
        self._rewards = np.zeros(n, dtype=np.float64)
        self._terms = np.zeros(n, dtype=np.bool_)
        self._truncs = np.zeros(n, dtype=np.bool_)
        self._autoreset_envs = np.zeros(n, dtype=np.bool_)
        self._views: list[dict[str, np.ndarray]] = []
        self._views_of: dict[str, np.ndarray] | None = None
        self._obs = self._new_obs()

    # -- helpers --------------------------------------------------------------------------------
    def _new_obs(self) -> dict[str, np.ndarray]:
        sp = self.single_observation_space.spaces  # type: ignore[attr-defined]
        return {k: np.zeros((self.num_envs, *sp[k].shape), dtype=sp[k].dtype) for k in self._keys}

    def _put(self, obs: dict[str, np.ndarray], i: int, single: dict[str, np.ndarray] | None) -> None:
        if single is None:  # write straight into the rows (views made once per buffer set)
            if self._views_of is not obs:
                self._views = [{k: obs[k][r] for k in self._keys} for r in range(self.num_envs)]
                self._views_of = obs
            self.envs[i]._write_obs(self._views[i])
        else:
            for k in self._keys:
                obs[k][i] = single[k]

    def __getstate__(self) -> dict[str, Any]:
        # the row views are rebuilt at the first step (was: a pickled or deep-copied env wrote
        # its observations into copies of the views, detached from the buffers it returned)
        state = self.__dict__.copy()
        state["_views"], state["_views_of"] = [], None
        return state

    def _actions(self, actions: Any) -> Any:
        # was: a str or dict of num_envs characters / keys was taken as that many (invalid)
        # actions, a set as its elements in hash order, a scalar raised "'int' object is not
        # iterable", and a ragged list was stepped env by env
        return batch_actions(actions, self.num_envs, self.single_action_space)

    # -- the API --------------------------------------------------------------------------------
    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        obs, infos = self.reset_raw(seed=seed, options=options)
        return {k: v.copy() for k, v in obs.items()}, self._merger.merge(infos)

    def reset_raw(self, *, seed: int | Sequence[int | None] | None = None,
                  options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], list[dict[str, Any] | None]]:
        """:meth:`reset` with the envs' infos as a list (None for envs not reset) and this
        env's buffers as the observation."""
        _check_open(self)
        _check_options(options)
        seeds = _seeds(seed, self.num_envs)
        options = dict(options) if options else None
        mask = None
        if options is not None and "reset_mask" in options:
            mask = options.pop("reset_mask")
            if not isinstance(mask, np.ndarray) or mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
                raise ValueError(f"options['reset_mask'] must be a bool array of shape ({self.num_envs},), got {mask!r}")
            if not mask.any():
                raise ValueError("options['reset_mask'] must select at least one env")
            options = options or None
        obs = self._new_obs() if mask is None else {k: v.copy() for k, v in self._obs.items()}
        infos: list[dict[str, Any] | None] = [None] * self.num_envs
        for i, env in enumerate(self.envs):
            if mask is not None and not mask[i]:
                continue
            o, infos[i] = env.reset(seed=seeds[i], options=options)
            self._put(obs, i, o)
            self._terms[i] = self._truncs[i] = self._autoreset_envs[i] = False
        self._obs = obs
        return obs, infos

    def step_raw(self, actions: Any) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """:meth:`step` with the envs' infos as a list (no vector-info merge); the arrays
        returned are this env's buffers (copy them to keep them past the next step)."""
        _check_open(self)
        acts = self._actions(actions)
        obs = self._obs
        rew, terms, truncs, auto = self._rewards, self._terms, self._truncs, self._autoreset_envs
        mode = self.autoreset_mode
        if mode is AutoresetMode.DISABLED:
            _check_none_ended(auto)  # before any env steps (was: at env i, after envs 0..i-1 had)
        rows = self._rows
        infos: list[dict[str, Any]] = []
        for i, env in enumerate(self.envs):
            if mode is AutoresetMode.NEXT_STEP and auto[i]:
                o, info = env.reset()
                self._put(obs, i, o)
                rew[i] = 0.0
                terms[i] = truncs[i] = False
            else:
                if rows:
                    r, te, tr, info = env._step_core(acts[i])
                    rew[i], terms[i], truncs[i] = r, te, tr
                    if mode is AutoresetMode.SAME_STEP and (te or tr):
                        final = {k: np.empty_like(obs[k][i]) for k in self._keys}
                        env._write_obs(final)
                        o, reset_info = env.reset()
                        self._put(obs, i, o)
                        info = {"final_obs": final, "final_info": info, **reset_info}
                    else:
                        self._put(obs, i, None)
                else:  # pragma: no cover - an env class without the row writer
                    o, rew[i], terms[i], truncs[i], info = env.step(acts[i])
                    if mode is AutoresetMode.SAME_STEP and (terms[i] or truncs[i]):
                        final_o = o
                        o, reset_info = env.reset()
                        info = {"final_obs": final_o, "final_info": info, **reset_info}
                    self._put(obs, i, o)
            infos.append(info)
        np.logical_or(terms, truncs, out=auto)
        return obs, rew, terms, truncs, infos

    def step(self, actions: Any) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rew, terms, truncs, infos = self.step_raw(actions)
        return ({k: v.copy() for k, v in obs.items()}, rew.copy(), terms.copy(), truncs.copy(),
                self._merger.merge(infos))

    def action_masks(self) -> np.ndarray:
        """The envs' boolean action masks, stacked ``(num_envs, mask size)``."""
        _check_open(self)
        return np.stack([env.action_masks() for env in self.envs])

    def render(self) -> tuple[Any, ...]:
        _check_open(self)  # as the subprocess variant, whose workers are gone (was: rendered on)
        return tuple(env.render() for env in self.envs)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        _check_open(self)  # as the subprocess variant (was: called on the closed envs)
        out = []
        for env in self.envs:
            f = getattr(env, name)
            out.append(f(*args, **kwargs) if callable(f) else f)
        return tuple(out)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        _check_open(self)
        return tuple(getattr(env, name) for env in self.envs)

    def set_attr(self, name: str, values: Any) -> None:
        _check_open(self)
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"set_attr needs {self.num_envs} values (one per env), got {len(values)}")
        for env, v in zip(self.envs, values):
            setattr(env, name, v)

    def close_extras(self, **kwargs: Any) -> None:
        # an env whose __init__ failed (bad arguments) has no envs to close
        for env in getattr(self, "envs", ()):
            env.close()


# ------------------------------------------------------------------------------------------------
# the subprocess variant
# ------------------------------------------------------------------------------------------------
def _error_payload(exc: BaseException) -> tuple[BaseException | None, str]:
    """What a worker sends for an exception: the exception itself when it pickles (the parent
    raises it, the same type as :class:`ArylVectorEnv` raises) and its traceback as text."""
    tb = traceback.format_exc()
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - an exception that does not pickle goes as text only
        return None, tb
    return exc, tb


def _worker(conn: Any, lo: int, hi: int, env_id: str, autoreset: str, kwargs: dict[str, Any],
            shm_names: dict[str, str], shapes: dict[str, tuple[int, ...]], n_total: int) -> None:
    shms: dict[str, shared_memory.SharedMemory] = {}
    try:
        try:
            venv = ArylVectorEnv(hi - lo, env_id=env_id, autoreset_mode=autoreset, **kwargs)
            shms = {k: shared_memory.SharedMemory(name=v) for k, v in shm_names.items()}
            views = {k: np.ndarray((n_total, *shapes[k]), dtype=np.float32, buffer=shms[k].buf)[lo:hi] for k in shapes}
        except Exception as e:  # noqa: BLE001 - sent to the parent, which raises it
            conn.send(("error", _error_payload(e)))
            return
        conn.send(("ok", None))
        while True:
            cmd, arg = conn.recv()
            # a command that raises is answered with its error and the worker goes on (was: the
            # worker exited, and every later call raised BrokenPipeError)
            try:
                reply: Any = None
                if cmd == "step":
                    obs, rew, te, tr, infos = venv.step_raw(arg)
                    for k, v in views.items():
                        v[...] = obs[k]
                    reply = (rew.copy(), te.copy(), tr.copy(), infos)
                elif cmd == "reset":
                    seeds, options = arg
                    m = options.get("reset_mask") if options else None
                    obs, reply = venv.reset_raw(seed=seeds, options=options)
                    for k, v in views.items():
                        if m is not None:
                            v[m] = obs[k][m]
                        else:
                            v[...] = obs[k]
                elif cmd == "call":
                    name, a, kw = arg
                    reply = venv.call(name, *a, **kw)
                elif cmd == "get_attr":
                    reply = venv.get_attr(arg)
                elif cmd == "set_attr":
                    venv.set_attr(*arg)
                elif cmd == "close":
                    venv.close()
            except Exception as e:  # noqa: BLE001 - sent to the parent, which raises it
                conn.send(("error", _error_payload(e)))
            else:
                conn.send(("ok", reply))
            if cmd == "close":
                break
    except (KeyboardInterrupt, EOFError, BrokenPipeError):  # pragma: no cover - the parent has gone
        pass
    finally:
        for s in shms.values():
            s.close()


class _WorkerTraceback(Exception):
    """The traceback of an exception raised in an :class:`ArylAsyncVectorEnv` worker (the
    ``__cause__`` of the exception the parent raises)."""


class ArylAsyncVectorEnv(VectorEnv):
    """:class:`ArylVectorEnv` split over ``workers`` processes (more cores): each worker steps
    its share of the envs and writes their observations into shared memory; the parent stacks
    nothing. The same results as :class:`ArylVectorEnv` (same seeds, autoreset, infos) and the
    same errors: an error in a worker is raised in the parent (its type and message, the
    worker's traceback as its cause) and the worker goes on; a worker that died (killed, out of
    memory) is a RuntimeError naming it, and the vector env must then be closed. With
    ``timeout=T`` (seconds), a call whose workers have not all answered within T raises a
    TimeoutError naming the silent one (a stopped or stuck worker; without it the call waits as
    long as the workers take), and the vector env must then be closed. It does not pickle (it
    owns processes and shared memory)."""

    def __init__(self, num_envs: int = 2, workers: int = 2, env_id: str = "aryl_gym/Aryl-v2",
                 autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
                 context: str | None = None, timeout: float | None = None, **kwargs: Any):
        n = check_num_envs(num_envs)
        w = check_num_envs(workers, "workers")
        if w > n:
            raise ValueError(f"workers ({w}) must not exceed num_envs ({n})")
        self._timeout = check_timeout(timeout)
        self.autoreset_mode = _autoreset(autoreset_mode)
        _no_time_limit(kwargs)
        _world_of(env_id, kwargs)
        probe = _single_env_class(env_id)(**kwargs)
        _check_scalar_reward(probe, env_id)  # before any worker starts
        self.num_envs = n
        self.single_observation_space = probe.observation_space
        self.single_action_space = probe.action_space
        self.observation_space = batch_space(probe.observation_space, n)
        self.action_space = batch_space(probe.action_space, n)
        self.metadata = dict(probe.metadata)
        self.metadata["autoreset_mode"] = self.autoreset_mode
        self.render_mode = probe.render_mode
        self.spec = None
        keys = tuple(getattr(probe, "_obs_keys", tuple(probe.observation_space.spaces)))
        probe.close()
        sp = self.single_observation_space.spaces  # type: ignore[attr-defined]
        self._shapes = {k: tuple(sp[k].shape) for k in keys}
        self._shm = {k: shared_memory.SharedMemory(create=True, size=max(4 * n * int(np.prod(s)), 1))
                     for k, s in self._shapes.items()}
        self._obs = {k: np.ndarray((n, *s), dtype=np.float32, buffer=self._shm[k].buf) for k, s in self._shapes.items()}
        self._merger = _InfoMerger(n)
        self._was_reset = False
        self._ended = np.zeros(n, dtype=np.bool_)  # envs that ended at the last step (disabled mode)
        self._dead: str | None = None
        self._silent: set[int] = set()  # workers that did not answer within the timeout
        bounds = np.linspace(0, n, w + 1).round().astype(int)
        self._slices = [(int(bounds[i]), int(bounds[i + 1])) for i in range(w)]
        ctx: Any = mp.get_context(context or ("fork" if "fork" in mp.get_all_start_methods() else "spawn"))
        self._conns = []
        self._procs = []
        self._closed = False
        for lo, hi in self._slices:
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(child, lo, hi, env_id, self.autoreset_mode.value, kwargs,
                                                  {k: s.name for k, s in self._shm.items()}, self._shapes, n),
                            daemon=True)
            p.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(p)
        try:
            self._recv_all(range(w))
        except BaseException:
            self.close()
            raise

    def __getstate__(self) -> dict[str, Any]:
        # was: "Pickling an AuthenticationString object is disallowed" from multiprocessing
        raise TypeError(
            "ArylAsyncVectorEnv does not pickle or copy (it owns worker processes and shared memory): "
            "pickle an ArylVectorEnv (gym.make_vec without workers) instead"
        )

    # -- talking to the workers -----------------------------------------------------------------
    def _worker_died(self, i: int) -> RuntimeError:
        """The error for worker ``i`` gone (its pipe broke); later calls raise it too."""
        p = self._procs[i]
        p.join(timeout=1)
        lo, hi = self._slices[i]
        self._dead = (
            f"ArylAsyncVectorEnv worker {i} (pid {p.pid}, envs {lo}..{hi - 1}) has died "
            f"(exit code {p.exitcode}): close() this vector env and make a new one"
        )
        return RuntimeError(self._dead)

    def _poll(self, i: int, deadline: float) -> bool:
        """Whether worker ``i`` answered (or its pipe closed: a dead worker) by ``deadline``."""
        try:
            return bool(self._conns[i].poll(max(deadline - time.monotonic(), 0.0)))
        except OSError:  # a broken pipe: recv() reports the dead worker
            return True

    def _no_answer(self, i: int) -> TimeoutError:
        """The error for worker ``i`` silent past ``timeout`` (stopped, or stuck); the vector
        env is unusable after it (the other replies of that call are not read)."""
        lo, hi = self._slices[i]
        self._silent.add(i)  # close() kills it at once
        self._dead = (
            f"ArylAsyncVectorEnv worker {i} (pid {self._procs[i].pid}, envs {lo}..{hi - 1}) did not answer "
            f"within timeout={self._timeout:g} s (stopped or stuck): close() this vector env and make a new one"
        )
        return TimeoutError(self._dead)

    def _check_usable(self) -> None:
        _check_open(self)
        if self._dead is not None:  # was: BrokenPipeError / ConnectionResetError / EOFError
            raise RuntimeError(self._dead)

    def _send(self, i: int, msg: tuple[str, Any]) -> None:
        try:
            self._conns[i].send(msg)
        except OSError:  # BrokenPipeError, ConnectionResetError
            raise self._worker_died(i) from None

    def _recv_all(self, which: Any) -> list[Any]:
        """The replies of the workers ``which``, every one read before an error is raised (was:
        the first error was raised with the other replies left in their pipes)."""
        out: list[Any] = []
        error: tuple[Any, str] | None = None
        died: RuntimeError | None = None
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        for i in which:
            # (TimeoutError is an OSError: raised outside the try that reads a dead worker)
            if deadline is not None and not self._poll(i, deadline):
                raise self._no_answer(i)
            try:
                status, payload = self._conns[i].recv()
            except (EOFError, OSError):
                died = died or self._worker_died(i)
                continue
            if status != "ok":
                error = error or payload
            out.append(payload)
        if died is not None:
            raise died
        if error is not None:
            exc, tb = error
            raise (exc if exc is not None else RuntimeError("an ArylAsyncVectorEnv worker failed")) from _WorkerTraceback(tb)
        return out

    def _gather(self, parts: list[Any]) -> list[Any]:
        return [x for part in parts for x in part]

    # -- the API --------------------------------------------------------------------------------
    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        obs, infos = self.reset_raw(seed=seed, options=options)
        return {k: v.copy() for k, v in obs.items()}, self._merger.merge(infos)

    def reset_raw(self, *, seed: int | Sequence[int | None] | None = None,
                  options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], list[dict[str, Any] | None]]:
        """:meth:`reset` with the envs' infos as a list and the shared buffers (valid until
        :meth:`close`)."""
        self._check_usable()
        _check_options(options)
        seeds = _seeds(seed, self.num_envs)
        mask = (options or {}).get("reset_mask")
        if mask is not None:
            if not isinstance(mask, np.ndarray) or mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
                raise ValueError(f"options['reset_mask'] must be a bool array of shape ({self.num_envs},), got {mask!r}")
            if not mask.any():
                raise ValueError("options['reset_mask'] must select at least one env")
        sent = []
        for i, (lo, hi) in enumerate(self._slices):
            opt = dict(options) if options else None
            if mask is not None:
                if not mask[lo:hi].any():
                    continue
                opt["reset_mask"] = mask[lo:hi]  # type: ignore[index]
            self._send(i, ("reset", (seeds[lo:hi], opt)))
            sent.append(i)
        parts = iter(self._recv_all(sent))
        infos: list[Any] = []
        for i, (lo, hi) in enumerate(self._slices):
            infos += next(parts) if i in sent else [None] * (hi - lo)
        self._ended[mask if mask is not None else slice(None)] = False
        self._was_reset = True
        return self._obs, infos

    def step_raw(self, actions: Any) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """:meth:`step` with the envs' infos as a list; the observation is the shared buffers
        (valid until :meth:`close`)."""
        self._check_usable()
        # the batched env's check and messages (was: numpy's "inhomogeneous shape" error, and
        # other messages than the batched env's); a list goes to the workers as it is
        acts = batch_actions(actions, self.num_envs, self.single_action_space)
        if self.autoreset_mode is AutoresetMode.DISABLED:
            _check_none_ended(self._ended)
        for i, (lo, hi) in enumerate(self._slices):
            self._send(i, ("step", acts[lo:hi]))
        parts = self._recv_all(range(len(self._conns)))
        rew = np.concatenate([p[0] for p in parts])
        te = np.concatenate([p[1] for p in parts])
        tr = np.concatenate([p[2] for p in parts])
        np.logical_or(te, tr, out=self._ended)
        return self._obs, rew, te, tr, self._gather([p[3] for p in parts])

    def step(self, actions: Any) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rew, te, tr, infos = self.step_raw(actions)
        return {k: v.copy() for k, v in obs.items()}, rew, te, tr, self._merger.merge(infos)

    def render(self) -> tuple[Any, ...]:
        """Each env's ``render()`` (as :meth:`ArylVectorEnv.render`; was: Gymnasium's
        NotImplementedError, and so SB3's ``get_images()`` raised)."""
        return self.call("render")

    def action_masks(self) -> np.ndarray:
        self._check_usable()
        if not self._was_reset:  # was: all-False masks read from the zeroed shared memory
            raise RuntimeError("call reset() before action_masks()")
        return self._obs["action_mask"] > 0.5

    def _ask_all(self, msg: tuple[str, Any]) -> list[Any]:
        self._check_usable()
        for i in range(len(self._conns)):
            self._send(i, msg)
        return self._recv_all(range(len(self._conns)))

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        return tuple(self._gather(self._ask_all(("call", (name, args, kwargs)))))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return tuple(self._gather(self._ask_all(("get_attr", name))))

    def set_attr(self, name: str, values: Any) -> None:
        self._check_usable()
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"set_attr needs {self.num_envs} values (one per env), got {len(values)}")
        for i, (lo, hi) in enumerate(self._slices):
            self._send(i, ("set_attr", (name, list(values[lo:hi]))))
        self._recv_all(range(len(self._conns)))

    def close_extras(self, **kwargs: Any) -> None:
        if getattr(self, "_closed", True):
            return
        self._closed = True
        for i in self._silent:  # stopped or stuck: waiting for it would only wait longer
            self._procs[i].kill()
        live = [c for i, c in enumerate(self._conns) if i not in self._silent]
        for c in live:
            try:
                c.send(("close", None))
            except OSError:  # a dead worker
                pass
        for c in live:
            try:
                if c.poll(5):  # a worker that does not answer is terminated below
                    c.recv()
            except (EOFError, OSError):  # a dead worker
                pass
        for p in self._procs:
            p.join(timeout=5)
            if p.is_alive():  # a stuck or stopped worker (SIGTERM waits for a stopped one)
                p.kill()
                p.join(timeout=5)
        # the observation as plain arrays before the shared memory goes (was: reading it after
        # close(), e.g. action_masks(), read unmapped memory: a segfault)
        self._obs = {k: v.copy() for k, v in self._obs.items()}
        for s in self._shm.values():
            s.close()
            s.unlink()


def make_vector(env_id: str, num_envs: int = 1, workers: int = 1, **kwargs: Any) -> VectorEnv:
    """The vector entry point of an allocation env id (registered with the id bound):
    :class:`ArylVectorEnv`, or :class:`ArylAsyncVectorEnv` with ``workers >= 2``."""
    w = check_num_envs(workers, "workers")
    if w >= 2:
        return ArylAsyncVectorEnv(num_envs=num_envs, workers=w, env_id=env_id, **kwargs)
    if kwargs.get("timeout") is not None:  # was: passed on to the env, an "unexpected keyword" TypeError
        raise ValueError("timeout= applies to worker processes only (workers >= 2): one process never waits")
    kwargs.pop("timeout", None)
    return ArylVectorEnv(num_envs=num_envs, env_id=env_id, **kwargs)


def sb3_vec_env(venv: ArylVectorEnv | ArylAsyncVectorEnv) -> Any:
    """``venv`` as a stable-baselines3 ``VecEnv`` (needs the ``train`` extra): same-step
    autoreset with ``infos[i]["terminal_observation"]`` and ``"TimeLimit.truncated"``, and
    ``env_method("action_masks")`` for sb3-contrib's MaskablePPO. ``venv`` must have been
    made with ``autoreset_mode="same_step"``."""
    # the SB3 adapter needs the train extra (stable-baselines3)
    from aryl_gym.envs.vector_sb3 import SB3ArylVecEnv

    return SB3ArylVecEnv(venv)


__all__ = ["ArylAsyncVectorEnv", "ArylVectorEnv", "MAX_ENVS", "batch_actions", "check_num_envs", "check_timeout",
           "make_vector", "sb3_vec_env"]
