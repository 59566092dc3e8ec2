"""The learned reclaim agent: a set policy over the loaned servers (numpy inference, no torch).

``load_reclaim_agent("reclaim-v1")`` loads ``agents/pretrained/reclaim-v1.npz`` (a path to any
``.npz`` written by ``aryl-gym train-reclaim`` works too) as a :class:`ReclaimSetAgent` with
SB3's ``predict(obs, state=None, episode_start=None, deterministic=True, action_masks=None)``.
It acts through ``ArylReclaimEnv(..., observation="v1")`` (its :attr:`~ReclaimSetAgent.
reclaim_env_kwargs`; the ``reclaim`` leaderboard suite builds its env with them):

* each candidate server (loaned, not picked yet) is described by its ``servers`` row (busy, base
  and flexible GPUs, jobs, preemption cost, flexible only), its ``servers_v1`` row and the
  event's ``reclaim_v1`` context (:mod:`aryl_gym.reclaim_features`);
* one small network scores every candidate the same way: ``h_i = relu(W1 x_i)``, then
  ``relu(W2 [h_i, mean_k h_k, max_k h_k])`` (the pool over the candidates gives each score the
  whole event's context), then a linear score;
* the action is the best-scoring candidate (``deterministic=False``: a draw from the masked
  softmax of the scores).

No parameter depends on the number of servers, so one set of weights serves any event, and
permuting the servers permutes the scores alike. Training: :mod:`aryl_gym.train.reclaim_agent`
(imitation of the exact optimum with DAgger).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"
#: the format written by :func:`save_weights`
FORMAT = "aryl-gym reclaim set policy"
FORMAT_VERSION = 1
#: columns of the env's ``servers`` rows the policy reads (the other two are constant over the
#: candidates: loaned = 1, picked = 0)
V0_COLUMNS: tuple[int, ...] = (2, 3, 4, 5, 6, 7)
_V0 = np.array(V0_COLUMNS)
_WEIGHTS = ("W1", "b1", "W2", "b2", "w3", "b3")


def shipped_reclaim_agents() -> list[str]:
    """Names of the learned reclaim agents shipped under ``agents/pretrained/`` (``NAME.npz``)."""
    return sorted(p.stem for p in PRETRAINED_DIR.glob("*.npz") if _is_weights_file(p))


def _is_weights_file(p: Path) -> bool:
    try:
        with np.load(p, allow_pickle=False) as z:
            return "meta" in z.files and json.loads(str(z["meta"])).get("format") == FORMAT
    except (OSError, ValueError):
        return False


def is_reclaim_agent_source(source: str) -> bool:
    """Whether ``source`` names a learned reclaim agent: a shipped name or a weights ``.npz``."""
    p = Path(source)
    if p.suffix == ".npz" and p.is_file():
        return _is_weights_file(p)
    return "/" not in source and (PRETRAINED_DIR / f"{source}.npz").is_file() and _is_weights_file(
        PRETRAINED_DIR / f"{source}.npz"
    )


def resolve_reclaim_agent(name_or_path: str | Path) -> Path:
    """The weights file of a shipped name (``reclaim-v1``) or a path; ValueError otherwise."""
    text = str(name_or_path)
    p = Path(text)
    if p.suffix == ".npz" or "/" in text or p.is_file():
        if not p.is_file():
            raise ValueError(f"reclaim agent weights {p}: file not found")
        return p
    q = PRETRAINED_DIR / f"{text}.npz"
    if not q.is_file():
        known = ", ".join(shipped_reclaim_agents()) or "none shipped yet"
        raise ValueError(f"unknown reclaim agent {text!r}: not a shipped one ({known}) nor a path to a .npz")
    return q


class ReclaimSetAgent:
    """A learned reclaim policy (module docstring). ``weights`` maps ``W1 b1 W2 b2 w3 b3`` to
    arrays; ``meta`` is the training record (features, configuration, results)."""

    #: what the env must be built with to give this agent its observation
    reclaim_env_kwargs: dict[str, Any] = {"observation": "v1"}

    def __init__(self, weights: dict[str, np.ndarray], meta: dict[str, Any] | None = None,
                 name: str = "reclaim", seed: int = 0):
        missing = [k for k in _WEIGHTS if k not in weights]
        if missing:
            raise ValueError(f"reclaim agent weights lack {', '.join(missing)}")
        w = {k: np.asarray(weights[k], dtype=np.float32) for k in _WEIGHTS}
        f, h = w["W1"].shape
        if w["b1"].shape != (h,) or w["W2"].shape != (3 * h, h) or w["b2"].shape != (h,) \
                or w["w3"].shape != (h,) or w["b3"].shape not in ((), (1,)):
            raise ValueError(
                f"reclaim agent weights have inconsistent shapes: W1 {w['W1'].shape}, "
                f"W2 {w['W2'].shape}, w3 {w['w3'].shape}"
            )
        self.meta = dict(meta or {})
        self.name = name
        self.n_features = f
        self.hidden = h
        self.W1, self.b1 = w["W1"], w["b1"]
        self.W2a = np.ascontiguousarray(w["W2"][:h])
        self.W2mean = np.ascontiguousarray(w["W2"][h : 2 * h])
        self.W2max = np.ascontiguousarray(w["W2"][2 * h :])
        self.b2, self.w3 = w["b2"], w["w3"]
        self.b3 = np.float32(np.asarray(w["b3"]).reshape(-1)[0])
        self._rng = np.random.default_rng(seed)

    # ------------------------------------------------------------------------------------------
    @staticmethod
    def inputs(servers: np.ndarray, servers_v1: np.ndarray, context: np.ndarray,
               rows: np.ndarray) -> np.ndarray:
        """The network's input rows for the candidate ``rows`` (float32, (len(rows), F))."""
        x = np.empty((len(rows), len(V0_COLUMNS) + servers_v1.shape[1] + len(context)), dtype=np.float32)
        a = len(V0_COLUMNS)
        b = a + servers_v1.shape[1]
        x[:, :a] = servers[rows[:, None], _V0]
        x[:, a:b] = servers_v1[rows]
        x[:, b:] = context
        return x

    def scores(self, x: np.ndarray) -> np.ndarray:
        """Scores of the candidate rows ``x`` ((m, F) -> (m,)); the network of the docstring."""
        if x.ndim != 2 or x.shape[1] != self.n_features:
            raise ValueError(f"expected candidate rows of {self.n_features} features, got shape {x.shape}")
        if len(x) == 0:
            return np.zeros(0, dtype=np.float32)
        h = x @ self.W1
        h += self.b1
        np.maximum(h, 0.0, out=h)
        bias = h.sum(axis=0) @ self.W2mean
        bias *= 1.0 / len(h)
        bias += h.max(axis=0) @ self.W2max
        bias += self.b2
        h2 = h @ self.W2a
        h2 += bias
        np.maximum(h2, 0.0, out=h2)
        out = h2 @ self.w3
        out += self.b3
        return out

    def _act(self, obs: dict[str, np.ndarray], mask: np.ndarray | None, deterministic: bool) -> int:
        for k in ("servers", "servers_v1", "reclaim_v1"):
            if k not in obs:
                raise ValueError(
                    f"the learned reclaim agent needs the observation key {k!r}: build the env with "
                    "observation='v1' (ArylReclaimEnv(..., observation='v1'))"
                )
        m = np.asarray(obs["action_mask"] if mask is None else mask).reshape(-1) > 0.5
        rows = np.flatnonzero(m)
        if len(rows) == 0:
            return 0  # nothing to pick: any action
        if len(rows) == 1:
            return int(rows[0])
        x = self.inputs(np.asarray(obs["servers"]), np.asarray(obs["servers_v1"]),
                        np.asarray(obs["reclaim_v1"]), rows)
        s = self.scores(x)
        if deterministic:
            return int(rows[int(np.argmax(s))])
        p = np.exp(s - s.max())
        return int(rows[int(self._rng.choice(len(rows), p=p / p.sum()))])

    def predict(self, obs: dict[str, np.ndarray], state: Any = None, episode_start: Any = None,
                deterministic: bool = True, action_masks: np.ndarray | None = None) -> tuple[Any, Any]:
        """SB3's ``predict``: one observation (a dict of the env's arrays) gives one action; a
        batch (a leading dimension on every key, as from a vector env) gives an array."""
        servers = np.asarray(obs["servers"]) if "servers" in obs else None
        if servers is not None and servers.ndim == 3:
            n = servers.shape[0]
            acts = np.array([
                self._act({k: np.asarray(v)[i] for k, v in obs.items()},
                          None if action_masks is None else np.asarray(action_masks)[i], deterministic)
                for i in range(n)
            ], dtype=np.int64)
            return acts, state
        return self._act(obs, action_masks, deterministic), state


def save_weights(path: str | Path, weights: dict[str, np.ndarray], meta: dict[str, Any]) -> Path:
    """Write ``weights`` (float32) and ``meta`` (JSON) to ``path`` (.npz, loads without pickle)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    record = {"format": FORMAT, "version": FORMAT_VERSION, **meta}
    arrays = {k: np.asarray(weights[k], dtype=np.float32) for k in _WEIGHTS}
    with open(p, "wb") as fh:
        np.savez_compressed(fh, meta=np.array(json.dumps(record, sort_keys=True)), **arrays)  # type: ignore[arg-type]
    return p


def load_reclaim_agent(name_or_path: str | Path = "reclaim-v1", seed: int = 0) -> ReclaimSetAgent:
    """A :class:`ReclaimSetAgent` from a shipped name or a weights ``.npz``.

    Raises:
        ValueError: naming the file when it is missing, not such a file, or inconsistent.
    """
    p = resolve_reclaim_agent(name_or_path)
    try:
        z = np.load(p, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{p}: not a reclaim agent weights file (.npz): {exc}") from None
    with z:
        if "meta" not in z.files:
            raise ValueError(f"{p}: not a reclaim agent weights file (no meta record)")
        try:
            meta = json.loads(str(z["meta"]))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{p}: unreadable meta record: {exc}") from None
        if meta.get("format") != FORMAT:
            raise ValueError(f"{p}: not a reclaim agent weights file (format {meta.get('format')!r})")
        if int(meta.get("version", -1)) != FORMAT_VERSION:
            raise ValueError(f"{p}: weights format version {meta.get('version')}, expected {FORMAT_VERSION}")
        missing = [k for k in _WEIGHTS if k not in z.files]
        if missing:
            raise ValueError(f"{p}: weights lack {', '.join(missing)}")
        weights = {k: z[k] for k in _WEIGHTS}
    return ReclaimSetAgent(weights, meta, name=p.stem, seed=seed)


def reclaim_v1(env: Any = None) -> ReclaimSetAgent:
    """Factory of the shipped ``reclaim-v1`` (for ``--agent NAME=aryl_gym.agents.reclaim_learned:reclaim_v1``)."""
    return load_reclaim_agent("reclaim-v1")


__all__ = [
    "ReclaimSetAgent",
    "is_reclaim_agent_source",
    "load_reclaim_agent",
    "reclaim_v1",
    "resolve_reclaim_agent",
    "save_weights",
    "shipped_reclaim_agents",
]
