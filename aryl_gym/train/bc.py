"""Behaviour cloning warm start from demonstrations (``aryl-gym demos``).

The demonstrations are a Minari dataset (``minari:ID``, written by ``aryl-gym demos --format
minari``; :mod:`aryl_gym.offline`) or an ``.npz`` with the observations (one array per Dict key, stored as
``obs_KEY`` by ``aryl-gym demos``; ``obs/KEY`` and ``observations/KEY`` are accepted too),
``actions`` and the action ``masks`` at each step, optionally ``rewards`` with episode ends
(``terminated``/``truncated`` or ``dones``). Record them with ``aryl-gym demos --policy aryl``
(Aryl acting through the env, exact replay) or :func:`collect_demos` (any ``act(env, obs)``). :func:`pretrain` maximises the masked log-likelihood of the demonstrated
actions under the model's policy (``policy.evaluate_actions``) for a few epochs, which starts RL
from an imitation of the demonstrator (Aryl by default) instead of from a random policy.

The actor is trained on the demonstrated actions; when the file also has ``rewards`` and ``dones``
(:func:`collect_demos` writes them), the value head is regressed on the discounted returns too, so
PPO starts with a critic that matches the imitated policy and does not wreck it in its first
updates.
"""

from __future__ import annotations

import time
import zipfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aryl_gym.commands._bc_args import bc_parser
from aryl_gym.commands._common import check_seed_range
from aryl_gym.config import ConfigError
from aryl_gym.envs.observation import JOB_FEATURES
from aryl_gym.envs.predict import HeuristicPredictor
from aryl_gym.offline import MINARI_PREFIX, is_minari_ref
from aryl_gym.rollout import ActAgent, Step, play, result_from_info
from aryl_gym.train.config import load_train_config
from aryl_gym.train.envs import make_single_env

_OBS_PREFIXES = ("obs/", "obs_", "observations/", "observation/", "obs.")
_ACTION_KEYS = ("actions", "action", "acts")
_MASK_KEYS = ("masks", "action_masks", "action_mask")


def load_demos(path: str | Path) -> tuple[dict[str, np.ndarray] | np.ndarray, np.ndarray, np.ndarray | None]:
    """``(observations, actions, masks)`` from a demonstrations file, or from a Minari dataset
    named ``minari:ID`` (:mod:`aryl_gym.offline`; a bare ``NAMESPACE/NAME-vN`` that is no file
    and is a local dataset too). A damaged or cut file is a ConfigError naming it."""
    if is_minari_ref(path):
        d = _minari_demos(path)
        return d["obs"], d["actions"], d["masks"]
    p = Path(path)
    try:
        return _load_demos(p)
    except (zipfile.BadZipFile, zlib.error, EOFError, KeyError) as exc:
        # a file cut by an interruption or a copy: was a zipfile traceback
        raise ConfigError(f"--bc-demos {p}: a damaged .npz ({type(exc).__name__}: {exc}); record it "
                          "again with `aryl-gym demos`") from None


def _load_demos(p: Path) -> tuple[dict[str, np.ndarray] | np.ndarray, np.ndarray, np.ndarray | None]:
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


def _minari_demos(ref: str | Path) -> dict[str, Any]:
    """A Minari dataset's steps (:func:`aryl_gym.offline.load_minari_demos`); a missing dataset
    or extra is a ConfigError."""
    # when a Minari dataset is named: minari (the offline extra) is imported by the reader
    from aryl_gym.extras import install_hint
    from aryl_gym.offline import load_minari_demos, minari_id

    try:
        return load_minari_demos(ref)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "minari":
            raise ConfigError(f"--bc-demos {ref}: reading Minari datasets needs minari: "
                              f"{install_hint('offline')}") from None
        raise
    except (FileNotFoundError, ValueError) as exc:
        raise ConfigError(f"--bc-demos {MINARI_PREFIX}{minari_id(ref)}: {exc}") from None


def demos_scenario(path: str | Path) -> tuple[str | None, str | None]:
    """``(scenario, config_hash)`` that ``aryl-gym demos`` stored with the demonstrations (an
    ``.npz``'s ``scenario`` and ``config_hash`` arrays, a Minari dataset's ``aryl_gym`` metadata);
    ``(None, None)`` when they are not stored (:func:`collect_demos` files, older recordings)."""
    if is_minari_ref(path):
        # when a Minari dataset is named: minari (the offline extra) is imported by the reader
        from aryl_gym.offline import NAMESPACE, load_dataset, minari_id

        try:
            md = load_dataset(path).storage.metadata
        except (FileNotFoundError, ValueError) as exc:
            raise ConfigError(f"--bc-demos {MINARI_PREFIX}{minari_id(path)}: {exc}") from None
        mine = md.get(NAMESPACE) if isinstance(md, dict) else None
        if not isinstance(mine, dict):
            return None, None
        ref, h = mine.get("scenario"), mine.get("config_hash")
    else:
        try:
            with np.load(path, allow_pickle=False) as data:
                ref = str(data["scenario"]) if "scenario" in data.files else None
                h = str(data["config_hash"]) if "config_hash" in data.files else None
        except (OSError, ValueError, zipfile.BadZipFile, zlib.error, EOFError, KeyError) as exc:
            raise ConfigError(f"--bc-demos {path}: not a readable .npz ({exc})") from None
    return (str(ref) if ref else None), (str(h) if h else None)


def check_demos_scenario(demos: str | Path, scenario: Any, what: str | None = None) -> None:
    """A ConfigError when ``demos`` were recorded (``aryl-gym demos``) in a scenario whose
    configuration hash is not ``scenario``'s (the one the run trains on: a name, a YAML path or a
    :class:`~aryl_gym.config.ScenarioConfig`; ``what`` names it in the message). Demonstrations
    without a stored hash pass (nothing to compare). ``bc.any_scenario`` skips this check."""
    # at run time: the scenario loader and provenance only when demonstrations are checked
    from aryl_gym.config import ScenarioConfig, load_scenario
    from aryl_gym.provenance import config_hash

    ref, stored = demos_scenario(demos)
    if stored is None:
        return
    if isinstance(scenario, ScenarioConfig):
        cfg = scenario
    elif isinstance(scenario, (str, Path)):
        cfg = load_scenario(scenario)
    else:  # pragma: no cover - make_single_env takes no other form
        return
    now = config_hash(cfg)
    if now == stored:
        return
    what = what or str(scenario if not isinstance(scenario, ScenarioConfig) else cfg.name)
    raise ConfigError(
        f"--bc-demos {demos}: recorded in scenario {ref} (configuration hash {stored}), but this run "
        f"trains on scenario {what} (configuration hash {now}): the demonstrations are not episodes of "
        f"the training scenario. Record them there (aryl-gym demos --scenario ... --policy ...), or "
        f"clone them anyway with --bc-any-scenario (bc: {{any_scenario: true}})")


def discounted_returns(path: str | Path, gamma: float) -> np.ndarray | None:
    """Discounted reward-to-go per demonstration step, if the file has ``rewards`` and
    ``dones`` (episode ends); used to pretrain the value head alongside the actor. A missing,
    damaged or cut file, rewards that are not finite numbers, or episode ends of another length
    than the rewards are a ConfigError naming the file (was: numpy's EOF, pickle or index error,
    raised by :func:`pretrain` after the run folder was made, since :func:`load_demos` reads only
    the observations and actions)."""
    if is_minari_ref(path):
        md = _minari_demos(path)
        d, r = md["dones"], md["rewards"].astype(np.float64)
    else:
        found = _npz_rewards(Path(path))
        if found is None:
            return None
        r, d = found
    out = np.zeros_like(r)
    acc = 0.0
    for i in range(len(r) - 1, -1, -1):
        if d[i]:
            acc = 0.0
        acc = r[i] + gamma * acc
        out[i] = acc
    return out.astype(np.float32)


def _npz_rewards(p: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """``(rewards as float64, episode ends as bool)`` of an ``.npz``, checked; ``None`` when the
    file has no rewards or no episode ends."""
    again = "record it again with `aryl-gym demos`"
    if not p.is_file():
        raise ConfigError(f"--bc-demos {p}: file not found (write one with `aryl-gym demos`)")
    try:
        with np.load(p, allow_pickle=False) as data:
            files = list(data.files)
            if "rewards" not in files:
                return None
            if "dones" in files:
                d = np.asarray(data["dones"])
            elif "terminated" in files and "truncated" in files:  # `aryl-gym demos` layout
                d = np.asarray(data["terminated"]) | np.asarray(data["truncated"])
            else:
                return None
            raw = np.asarray(data["rewards"])
    except (OSError, ValueError, TypeError, zipfile.BadZipFile, zlib.error, EOFError, KeyError) as exc:
        # a file cut by an interruption or a copy, or arrays numpy cannot read without pickle
        raise ConfigError(f"--bc-demos {p}: a damaged or unreadable .npz: its rewards or episode ends do not load "
                          f"({type(exc).__name__}: {exc}); {again}") from None
    if raw.ndim != 1 or d.ndim != 1 or len(d) != len(raw):
        raise ConfigError(f"--bc-demos {p}: rewards of shape {raw.shape} and episode ends (dones, or "
                          f"terminated/truncated) of shape {d.shape}: expected two 1-D arrays of one row "
                          f"per step; {again}")
    if raw.dtype.kind not in "biuf":
        raise ConfigError(f"--bc-demos {p}: rewards are {raw.dtype} values, not numbers; {again}")
    r = raw.astype(np.float64)
    if not np.isfinite(r).all():
        bad = int(np.flatnonzero(~np.isfinite(r))[0])
        raise ConfigError(f"--bc-demos {p}: reward {r[bad]} at step {bad} is not a finite number (the value "
                          f"head would learn NaN); {again}")
    return r, d.astype(bool)


def check_demos(path: str | Path) -> int:
    """Read demonstrations as :func:`pretrain` does (:func:`load_demos` and
    :func:`discounted_returns`), before any work: a missing, damaged or inconsistent file is a
    ConfigError naming it. Returns the number of steps."""
    _obs, actions, _masks = load_demos(path)
    returns = discounted_returns(path, 1.0)
    if returns is not None and len(returns) != len(actions):
        raise ConfigError(f"--bc-demos {path}: {len(returns)} rewards but {len(actions)} actions (one of each "
                          "per step); record the demonstrations again with `aryl-gym demos`")
    return len(actions)


def pretrain(
    model: Any,
    demos: str | Path,
    epochs: int = 10,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    log: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """Behaviour-clone ``model.policy`` on ``demos``; return accuracy and loss figures."""
    # torch (the train extra): imported when used
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
    returns = discounted_returns(demos, float(getattr(model, "gamma", 0.99)))
    if returns is not None and len(returns) != n:  # was: an IndexError, or returns of other steps
        raise ConfigError(f"--bc-demos {demos}: {len(returns)} rewards but {n} actions (one of each per "
                          "step); record the demonstrations again with `aryl-gym demos`")
    use_masks = masks is not None and "action_masks" in policy.evaluate_actions.__code__.co_varnames
    opt = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    rng = np.random.default_rng(0)
    policy.set_training_mode(True)
    last_loss = last_vloss = float("nan")
    for ep in range(int(epochs)):
        order = rng.permutation(n)
        losses: list[float] = []
        vlosses: list[float] = []
        for i in range(0, n, batch_size):
            idx = order[i : i + batch_size]
            o = {k: v[idx] for k, v in obs.items()} if isinstance(obs, dict) else obs[idx]
            ot, _ = policy.obs_to_tensor(o)
            at = torch.as_tensor(actions[idx], device=policy.device)
            if use_masks and masks is not None:  # use_masks implies masks
                values, logp, _ = policy.evaluate_actions(ot, at, action_masks=masks[idx])
            else:
                values, logp, _ent = policy.evaluate_actions(ot, at)
            nll = -logp.mean()
            loss = nll
            if returns is not None:
                rt = torch.as_tensor(returns[idx], device=policy.device)
                vloss = torch.nn.functional.mse_loss(values.flatten(), rt)
                loss = loss + 0.5 * vloss
                vlosses.append(float(vloss.detach()))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            opt.step()
            losses.append(float(nll.detach()))
        last_loss = float(np.mean(losses)) if losses else float("nan")
        last_vloss = float(np.mean(vlosses)) if vlosses else float("nan")
        if log:
            log(f"bc epoch {ep + 1}/{epochs}: nll {last_loss:.4f}  value mse {last_vloss:.3g}")
    policy.set_training_mode(False)
    acc = accuracy(model, obs, actions, masks)
    if log:
        log(f"bc: {n} demonstration steps, action accuracy {acc:.3f}")
    return {"nll": last_loss, "value_mse": last_vloss, "accuracy": acc, "steps": float(n)}


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


# ---------------------------------------------------------------------------------------------
# collecting demonstrations
# ---------------------------------------------------------------------------------------------
def sjf_grant(env: Any, obs: Mapping[str, np.ndarray]) -> int:
    """A greedy shortest-predicted-job-first demonstrator for the ``sequential`` action mode
    [ours]: grant the allowed slot with the shortest predicted remaining time at ``w_max``
    (job feature ``pred_time_wmax``), ties to the lower slot; commit when no grant is allowed.

    Like Aryl's phase one (paper section 5: queued jobs by predicted running time, shortest
    first), then elastic jobs grow by one worker at a time, shortest first, while they fit.
    """

    u = env.unwrapped
    m = u.action_masks()
    k = u.k
    grants = np.flatnonzero(m[:k])
    if not len(grants):
        return int(len(m) - 1)  # commit
    pt = np.asarray(obs["jobs"])[grants, JOB_FEATURES.index("pred_time_wmax")]
    return int(grants[int(np.argmin(pt))])


def collect_demos(
    env: Any,
    act: Callable[[Any, Mapping[str, np.ndarray]], Any],
    seeds: Sequence[int],
    out: str | Path,
) -> dict[str, float]:
    """Play ``act(env, obs) -> action`` on ``seeds`` (``episode_seed`` = seed) and write the
    ``.npz`` :func:`load_demos` reads (``obs/KEY``, ``actions``, ``masks``). Returns the mean
    avg JCT of the demonstrator and the number of steps."""

    obs_buf: dict[str, list[np.ndarray]] = {}
    acts: list[Any] = []
    masks: list[np.ndarray] = []
    rewards: list[float] = []
    dones: list[bool] = []
    jcts: list[float] = []

    def keep(st: Step) -> None:
        for k, v in st.obs.items():
            obs_buf.setdefault(k, []).append(np.asarray(v))
        masks.append(np.asarray(st.mask))  # as np.stack would take it
        acts.append(st.action)
        rewards.append(float(st.reward))
        dones.append(st.terminated or st.truncated)

    agent = ActAgent(env, act)
    for s in seeds:
        ro = play(agent, env, seed=int(s), options={"episode_seed": int(s)}, on_step=keep, masks=True)
        res = result_from_info(ro.info)
        if res is not None:
            jcts.append(res.avg_jct)
    arrays = {f"obs/{k}": np.stack(v) for k, v in obs_buf.items()}
    arrays["actions"] = np.asarray(acts)
    arrays["masks"] = np.stack(masks).astype(bool)
    arrays["rewards"] = np.asarray(rewards, dtype=np.float32)
    arrays["dones"] = np.asarray(dones, dtype=bool)
    # numpy's stubs match ``**arrays`` against the ``allow_pickle: bool`` keyword too
    np.savez_compressed(out, **arrays)  # type: ignore[arg-type]
    return {"avg_jct": float(np.mean(jcts)) if jcts else float("nan"), "steps": float(len(acts))}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m aryl_gym.train.bc --config maskable_ppo --scenario testbed --episodes 48
    --out demos.npz``: record the greedy SJF demonstrator (:func:`sjf_grant`) through the env
    configured exactly as the training config's (same kwargs, so the same reward scale).
    For Aryl's own demonstrations use ``aryl-gym demos --policy aryl``."""

    parser = bc_parser(main.__doc__)
    a = parser.parse_args(argv)
    try:  # episode seeds seed .. seed + episodes - 1 (was: beyond 2**63 - 1 accepted)
        check_seed_range(a.seed, a.episodes, "--seed", "episodes")
    except ValueError as exc:
        parser.error(str(exc))
    cfg = load_train_config(a.config, a.scenario)
    if cfg.env_kwargs.get("action_mode", "targets") != "sequential":
        raise SystemExit("the demonstrators need action_mode: sequential")
    tic = time.perf_counter()
    stats = record_demos(cfg, a.policy, a.episodes, a.seed, a.out)
    print(f"wrote {a.out}: {a.episodes} episodes, {int(stats['steps'])} steps, demonstrator avg JCT "
          f"{stats['avg_jct']:,.0f} s, {time.perf_counter() - tic:.0f} s")
    return 0


def record_demos(cfg: Any, policy: str, episodes: int, seed: int, out: str | Path) -> dict[str, float]:
    """Record ``episodes`` demonstrations (episode seeds ``seed``, ``seed + 1``, ...) of
    ``policy`` (a registry name acting through :class:`~aryl_gym.envs.predict.HeuristicPredictor`
    on the simulator's full state, or ``"sjf-grant"``, :func:`sjf_grant`) in the env of training
    config ``cfg`` (worlds included) into ``out``; see :func:`collect_demos`."""

    env = make_single_env(cfg)
    act: Callable[[Any, Any], Any] = sjf_grant
    if policy != "sjf-grant":
        predictor = HeuristicPredictor(policy, env)

        def act(env: Any, obs: Any) -> Any:  # noqa: ARG001 - the predictor holds the env
            return int(predictor.predict(obs)[0])

    return collect_demos(env, act, range(int(seed), int(seed) + int(episodes)), out)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
