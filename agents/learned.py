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
        return str(self.config.get("env_id", "aryl_gym/Aryl-v0"))

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
        if self.masked:
            return self.model.predict(
                obs, state=state, episode_start=episode_start, deterministic=deterministic,
                action_masks=action_masks,
            )
        return self.model.predict(obs, state=state, episode_start=episode_start, deterministic=deterministic)

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
