"""Learned agents: load an SB3 model (a shipped name or a path) as an SB3-style ``predict`` policy.

``load_agent("ppo-testbed")`` resolves ``agents/pretrained/ppo-testbed.zip`` and its config
``ppo-testbed.yaml`` (the resolved training config: algorithm, scenario, env id and kwargs);
``load_agent("runs/RUN")`` a run folder (its ``best_model.zip`` if present, else ``model.zip``);
``load_agent("path/model.zip")`` a model file (its config is looked for beside it). The returned
:class:`LearnedAgent` has ``predict(obs, state=None, episode_start=None, deterministic=True)``
and passes the action mask to ``MaskablePPO.predict(action_masks=...)``: from the argument
``action_masks`` when given, else from the observation's ``action_mask`` key. Observation
statistics saved by ``VecNormalize`` (``vecnormalize.pkl`` beside the model) are applied.

torch and stable-baselines3 are imported only when an agent is loaded (never on
``import aryl_gym``).
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aryl_gym.config import ConfigError

PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"


def shipped_agents() -> list[str]:
    """Names of the agents shipped under ``agents/pretrained/``."""
    return sorted(p.stem for p in PRETRAINED_DIR.glob("*.zip"))


def resolve_agent_path(name_or_path: str | Path) -> tuple[Path, Path | None, Path | None]:
    """``(model.zip, config.yaml or None, vecnormalize.pkl or None)`` for a name or a path."""
    text = str(name_or_path)
    p = Path(text)
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
        if cfg is None and p.parent.name == "checkpoints":
            cfg = _opt(p.parent.parent / "config.yaml")
        vn = _opt(p.parent / f"{p.stem}_vecnormalize.pkl") or _opt(p.parent / "vecnormalize.pkl")
        return p, cfg, vn
    model = PRETRAINED_DIR / f"{text}.zip"
    if not model.exists():
        known = ", ".join(shipped_agents()) or "none shipped yet"
        raise ConfigError(
            f"unknown agent {text!r}: not a shipped agent ({known}) nor a path to a model .zip or run folder"
        )
    return model, _opt(PRETRAINED_DIR / f"{text}.yaml"), _opt(PRETRAINED_DIR / f"{text}_vecnormalize.pkl")


def _opt(p: Path) -> Path | None:
    return p if p.exists() else None


@dataclass
class LearnedAgent:
    """An SB3 model as a policy acting through the env (SPEC 3, "Learned")."""

    name: str
    model: Any
    config: Mapping[str, Any] = field(default_factory=dict)
    obs_norm: Any = None  # a VecNormalize (without its venv) or None
    masked: bool = True

    @property
    def scenario(self) -> str | None:
        return self.config.get("scenario")

    @property
    def env_id(self) -> str:
        """The env id to act through. Agents trained on a retired version (``-v0``, the world
        before elastic growth and bursty arrivals) act through the current one, whose spaces
        are the same; :attr:`trained_on` keeps the version they were trained on."""
        env_id = str(self.config.get("env_id", "aryl_gym/Aryl-v1"))
        retired = {"aryl_gym/Aryl-v0": "aryl_gym/Aryl-v1",
                   "aryl_gym/ArylReclaim-v0": "aryl_gym/ArylReclaim-v1"}
        return retired.get(env_id, env_id)

    @property
    def trained_on(self) -> str:
        """The env id in the agent's training config (may be a retired version)."""
        return str(self.config.get("env_id", "aryl_gym/Aryl-v1"))

    @property
    def env_kwargs(self) -> dict[str, Any]:
        return dict(self.config.get("env_kwargs", {}) or {})

    def make_env(self, scenario: str | None = None, **overrides: Any) -> Any:
        """An env like the one the agent was trained on (``scenario`` may differ)."""
        import gymnasium as gym

        import aryl_gym  # noqa: F401  (registers the envs)

        kwargs = {**self.env_kwargs, **overrides}
        kwargs["scenario"] = scenario or self.scenario or kwargs.get("scenario", "testbed")
        return gym.make(self.env_id, **kwargs)

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, Any]:
        obs = observation
        if action_masks is None and isinstance(obs, Mapping) and "action_mask" in obs:
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
            from gymnasium import spaces

            pol = getattr(self.model, "policy", None)
            ok = (
                isinstance(getattr(self.model, "action_space", None), spaces.Discrete)
                and all(hasattr(pol, a) for a in ("action_net", "mlp_extractor", "pi_features_extractor"))
                and type(pol).__name__.startswith("Maskable")
            )
            self._fast = ok
        return bool(ok)

    def masked_argmax(self, observation: Any, action_masks: np.ndarray) -> np.ndarray:
        """Deterministic masked action with one forward pass of the actor, no distribution
        objects: the same operations, in the same order, as sb3-contrib's
        ``MaskablePPO.predict(obs, action_masks=m, deterministic=True)`` (normalise the logits,
        masked logits to -1e8, normalise again, softmax, argmax: ties go to the lowest action),
        so the action is identical (``tests/test_train.py`` checks this on a batch), at a
        fraction of the cost (about 17 ms per call through SB3's masked distribution code)."""
        import torch as th

        pol = self.model.policy
        obs_t, vectorized = pol.obs_to_tensor(observation)
        with th.no_grad():
            features = pol.extract_features(obs_t, pol.pi_features_extractor)
            logits = pol.action_net(pol.mlp_extractor.forward_actor(features))
            logits = logits - logits.logsumexp(dim=-1, keepdim=True)
            m = th.as_tensor(np.asarray(action_masks), dtype=th.bool).reshape(logits.shape)
            logits = th.where(m, logits, th.tensor(-1e8, dtype=logits.dtype))
            logits = logits - logits.logsumexp(dim=-1, keepdim=True)
            act = th.argmax(th.softmax(logits, dim=-1), dim=1)
        out = act.numpy().reshape((-1, *self.model.action_space.shape))
        return out if vectorized else out.squeeze(axis=0)

    def __repr__(self) -> str:
        return f"LearnedAgent(name={self.name!r}, algo={type(self.model).__name__}, scenario={self.scenario!r})"


def load_agent(name_or_path: str | Path, env: Any = None) -> LearnedAgent:
    """Load a shipped agent by name (``ppo-testbed``) or a model/run folder by path.

    ``env`` (optional) is attached to the model (needed only to continue training it).
    """
    import yaml

    model_path, cfg_path, vn_path = resolve_agent_path(name_or_path)
    config: dict[str, Any] = {}
    if cfg_path is not None:
        config = yaml.safe_load(cfg_path.read_text()) or {}
    algo = str(config.get("algo", "")) or None
    from aryl_gym.train.config import ALGOS
    from aryl_gym.train.runner import algo_class

    candidates = [algo] if algo else ["maskable_ppo", "ppo"]
    model = None
    errors = []
    for a in candidates:
        if a not in ALGOS:
            raise ConfigError(f"{cfg_path}: unknown algo {a!r}")
        try:
            model = algo_class(a).load(str(model_path), env=env, device="cpu")
            algo = a
            break
        except (ValueError, KeyError, RuntimeError) as exc:  # wrong class for this zip
            errors.append(f"{a}: {exc}")
    if model is None:
        raise ConfigError(f"cannot load {model_path} as an SB3 model: {'; '.join(errors)}")
    obs_norm = None
    if vn_path is not None:
        with open(vn_path, "rb") as fh:
            obs_norm = pickle.load(fh)
        obs_norm.training = False
    name = Path(str(name_or_path)).stem if Path(str(name_or_path)).suffix else Path(str(name_or_path)).name
    return LearnedAgent(name=name, model=model, config=config, obs_norm=obs_norm, masked=ALGOS[algo][2])
