"""Behaviour cloning warm start from demonstrations (``aryl-gym demos``).

The demonstrations are an ``.npz`` with the observations (one array per Dict key, stored as
``obs/KEY``; ``obs_KEY`` and ``observations/KEY`` are accepted too), ``actions`` and the action
``masks`` at each step. :func:`pretrain` maximises the masked log-likelihood of the demonstrated
actions under the model's policy (``policy.evaluate_actions``) for a few epochs, which starts RL
from an imitation of the demonstrator (Aryl by default) instead of from a random policy.

Only the actor (and the shared feature extractor) is trained here; the value head is left to PPO.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from aryl_gym.config import ConfigError

_OBS_PREFIXES = ("obs/", "obs_", "observations/", "observation/", "obs.")
_ACTION_KEYS = ("actions", "action", "acts")
_MASK_KEYS = ("masks", "action_masks", "action_mask")


def load_demos(path: str | Path) -> tuple[dict[str, np.ndarray] | np.ndarray, np.ndarray, np.ndarray | None]:
    """``(observations, actions, masks)`` from a demonstrations file."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"--bc-demos {p}: file not found (write one with `aryl-gym demos`)")
    try:
        data = np.load(p, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--bc-demos {p}: not a readable .npz ({exc})") from None
    files = list(data.files)
    obs: dict[str, np.ndarray] = {}
    for f in files:
        for pre in _OBS_PREFIXES:
            if f.startswith(pre):
                obs[f[len(pre):]] = data[f]
                break
    flat_obs: np.ndarray | None = None
    if not obs:
        for k in ("obs", "observations"):
            if k in files:
                flat_obs = data[k]
    act = next((data[k] for k in _ACTION_KEYS if k in files), None)
    if act is None or (not obs and flat_obs is None):
        raise ConfigError(
            f"--bc-demos {p}: expected observations (obs/KEY arrays) and 'actions'; found {files}"
        )
    masks = next((data[k] for k in _MASK_KEYS if k in files), None)
    if masks is None and "action_mask" in obs:
        masks = obs["action_mask"]
    n = len(act)
    for k, v in obs.items():
        if len(v) != n:
            raise ConfigError(f"--bc-demos {p}: obs/{k} has {len(v)} rows but actions has {n}")
    return (obs if obs else flat_obs), act, (masks.astype(bool) if masks is not None else None)  # type: ignore[return-value]


def pretrain(
    model: Any,
    demos: str | Path,
    epochs: int = 10,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    log: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """Behaviour-clone ``model.policy`` on ``demos``; return accuracy and loss figures."""
    import torch

    obs, actions, masks = load_demos(demos)
    policy = model.policy
    space_keys = getattr(model.observation_space, "spaces", None)
    if isinstance(obs, dict) and space_keys is not None:
        missing = [k for k in space_keys if k not in obs]
        if missing:
            raise ConfigError(f"--bc-demos {demos}: observation keys {missing} missing from the file")
        obs = {k: obs[k] for k in space_keys}
    vn = model.get_vec_normalize_env()
    if vn is not None and getattr(vn, "norm_obs", False):
        # Seed the running statistics with the demonstrations, then feed normalised inputs.
        for k in vn.norm_obs_keys:
            vn.obs_rms[k].update(obs[k])
        obs = vn.normalize_obs(obs)
    n = len(actions)
    use_masks = masks is not None and "action_masks" in policy.evaluate_actions.__code__.co_varnames
    opt = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    rng = np.random.default_rng(0)
    policy.set_training_mode(True)
    last_loss = float("nan")
    for ep in range(int(epochs)):
        order = rng.permutation(n)
        losses = []
        for i in range(0, n, batch_size):
            idx = order[i : i + batch_size]
            o = {k: v[idx] for k, v in obs.items()} if isinstance(obs, dict) else obs[idx]
            ot, _ = policy.obs_to_tensor(o)
            at = torch.as_tensor(actions[idx], device=policy.device)
            if use_masks:
                _, logp, ent = policy.evaluate_actions(ot, at, action_masks=masks[idx])
            else:
                _, logp, ent = policy.evaluate_actions(ot, at)
            loss = -logp.mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            opt.step()
            losses.append(float(loss.detach()))
        last_loss = float(np.mean(losses)) if losses else float("nan")
        if log:
            log(f"bc epoch {ep + 1}/{epochs}: nll {last_loss:.4f}")
    policy.set_training_mode(False)
    acc = accuracy(model, obs, actions, masks)
    if log:
        log(f"bc: {n} demonstration steps, action accuracy {acc:.3f}")
    return {"nll": last_loss, "accuracy": acc, "steps": float(n)}


def accuracy(model: Any, obs: Any, actions: np.ndarray, masks: np.ndarray | None, limit: int = 4096) -> float:
    """Share of demonstration steps whose deterministic action equals the demonstrated one."""
    n = min(len(actions), limit)
    o = {k: v[:n] for k, v in obs.items()} if isinstance(obs, dict) else obs[:n]
    kw: dict[str, Any] = {"deterministic": True}
    if masks is not None and "action_masks" in model.predict.__code__.co_varnames:
        kw["action_masks"] = masks[:n]
    pred, _ = model.predict(o, **kw)
    a = actions[:n].reshape(n, -1)
    return float(np.mean(np.all(np.asarray(pred).reshape(n, -1) == a, axis=1)))
