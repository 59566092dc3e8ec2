"""Minari datasets of reference policies acting through the env (``aryl-gym demos --format minari``).

`Minari <https://minari.farama.org>`_ (0.5, the ``offline`` extra) is Farama's standard for
offline-RL datasets: ``minari.load_dataset(ID)`` gives episodes with observations (``N + 1`` per
episode: the reset observation, then one after every step), actions, rewards, terminations,
truncations and infos, and ``dataset.recover_environment()`` rebuilds the env that made them.

**Dataset ids** (:func:`default_dataset_id`): ``aryl_gym/{scenario}/{policy}-v{version}``, for
example ``aryl_gym/testbed/aryl-v0``: the namespace ``aryl_gym``, the scenario (a YAML path by
its file stem), the reference policy, and a version of the recording (bump it when you record
the same scenario and policy again with other settings; Minari never overwrites a dataset).
Characters Minari does not take in a name (``+``, ``.``) become ``-`` (``aryl+tuned`` ->
``aryl-tuned``). Datasets live under ``$MINARI_DATASETS_PATH`` (default ``~/.minari/datasets``),
``ID`` as a folder path below it. Datasets do not nest (:func:`check_not_nested`): an id inside
another dataset's folder, or one whose folder holds other datasets, is refused when writing, as
replacing the outer one would delete the inner ones.

**What is stored.** Observations: the env's Dict observation, the action mask included (its
``action_mask`` key, 1 where an action is allowed). Actions, rewards, terminations and
truncations as the env returned them. Infos (one per observation; the reset's first):
``reward_<component>`` for every reward component (``info["reward_components"]``, 0 at the
reset), ``time``, ``elapsed``, ``decision_point``, ``substep``, ``invalid``, ``invalid_total``,
``queued``, ``running``, ``done``, ``unplaced`` and ``window`` (the job ids in the window's
slots). Each episode's metadata: its ``seed`` and reset ``options`` (``{"episode_seed": s}``),
and the final scheduling figures (``episode_metrics``: avg JCT, queueing, usage, ...). The
dataset's metadata: ``author``, ``algorithm_name`` (the label below), the env spec (id and every
keyword argument, JSON: the policy's placement options and reclaim rule included, so
``recover_environment()`` rebuilds the env the episodes were played in), ``requirements``
(this aryl-gym version) and, under ``aryl_gym``: scenario (resolved) and its configuration
hash, policy, label, env id, action mode, window, decisions not expressed, world version, episode
seeds, aryl-gym version and code commit.

**Played through the env.** The policy acts through the env's action space, seeing only the
jobs in its window (``--window``): the dataset is labelled so (``algorithm_name`` and
``aryl_gym.label``: ``aryl played through aryl_gym/Aryl-v2 (sequential actions, window 16)``,
with ``env_id``, ``action_mode`` and ``window``), and ``aryl_gym.decisions_not_expressed``
counts the parts of the policy's decisions the env could not express (a job outside the window,
a masked action; per episode in its metadata). Only when it is 0 -- in the sequential mode, with
a window at least as large as the number of active jobs -- are the episodes the policy's native
ones (:mod:`aryl_gym.envs.predict`).

**The scenario** is stored resolved (:func:`scenario_ref`: a shipped name stays a name, a YAML
path becomes absolute, so the recovered env finds it from any folder) with the hash of its
resolved configuration (``aryl_gym.config_hash``, :func:`aryl_gym.provenance.config_hash`, as
leaderboard rows record it). Reading a dataset (:func:`load_minari_demos`) or rebuilding its env
(:func:`recover_environment`) refuses a dataset whose scenario file now has another hash: its
episodes were not played in that configuration. A dataset written before the hash was stored is
read without the check.

**Faithful.** Resetting the recovered env (:func:`recover_environment`, or Minari's
``dataset.recover_environment()``, which does not check the scenario's hash) with an episode's
``seed`` and ``options`` and playing its actions gives its observations and rewards bit for bit
(float32 observations and float64 rewards are stored as they are; ``tests/test_offline.py``).

Behaviour cloning reads a dataset as ``--bc-demos minari:ID`` (:func:`load_minari_demos`).

Minari 0.5's default storage (HDF5) and its step-by-step ``DataCollector`` need ``h5py`` and
``jax``, which the extra does not install; the datasets here use Minari's ``arrow`` storage
(pyarrow, a core dependency) and are written from whole episodes
(``minari.create_dataset_from_buffers``). ``minari.load_dataset`` reads either.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import math
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: the prefix that names a Minari dataset where a demonstrations file is expected
MINARI_PREFIX = "minari:"
#: the namespace of the datasets recorded here
NAMESPACE = "aryl_gym"
#: Minari's dataset id pattern, ``(namespace/)name(-vN)`` (minari.dataset.minari_dataset)
_ID_RE = re.compile(r"^(?:[-_\w][-_\w/]*[-_\w]+/)?[-_\w]+?-v\d+$")
#: scalar infos kept at every step (0 where the reset info lacks them)
INFO_INT = ("decision_point", "substep", "invalid", "invalid_total", "queued", "running", "done", "unplaced")
INFO_FLOAT = ("time", "elapsed")


def require_minari() -> Any:
    """``import minari``; without the ``offline`` extra a ModuleNotFoundError that
    :func:`aryl_gym.extras.missing_extra` turns into one line naming it."""
    import minari  # the offline extra

    return minari


def slug(text: str) -> str:
    """A Minari-safe name part: letters, digits, ``_`` and ``-``; anything else becomes ``-``."""
    out = re.sub(r"[^\w-]+", "-", text).strip("-")
    if not out:
        raise ValueError(f"cannot make a dataset name from {text!r}")
    return out


def default_dataset_id(scenario: str | Path, policy: str, version: int = 0) -> str:
    """``aryl_gym/{scenario}/{policy}-v{version}``; a scenario YAML path by its file stem."""
    name = str(scenario)
    if name.endswith((".yaml", ".yml")) or os.sep in name or "/" in name:
        name = Path(name).stem
    return f"{NAMESPACE}/{slug(name)}/{slug(policy)}-v{int(version)}"


def check_dataset_id(dataset_id: str) -> str:
    """``dataset_id`` if Minari takes it (``namespace/name-vN``), else a ValueError saying how."""
    if not _ID_RE.fullmatch(dataset_id):
        raise ValueError(
            f"bad Minari dataset id {dataset_id!r}: write it as NAMESPACE/NAME-vN with letters, digits, "
            f"'_' and '-' (e.g. {NAMESPACE}/testbed/aryl-v0)")
    return dataset_id


@contextlib.contextmanager
def datasets_path(path: str | Path | None) -> Iterator[None]:
    """Point Minari at ``path`` (it reads ``$MINARI_DATASETS_PATH``) for the duration; ``None``
    leaves the environment as it is."""
    if path is None:
        yield
        return
    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(Path(path).expanduser().resolve())
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = old


def datasets_root() -> Path:
    """Where Minari keeps datasets now (``$MINARI_DATASETS_PATH`` or ``~/.minari/datasets``).
    A variable that is set but empty is a ValueError: Minari does not take it (it reads it as set
    and fails on the empty path), and was taken here as unset, so the checks named
    ``~/.minari/datasets`` and every episode was recorded before Minari failed."""
    env = os.environ.get("MINARI_DATASETS_PATH")
    if env is not None and not env.strip():
        raise ValueError("MINARI_DATASETS_PATH is set but empty, which Minari cannot use: unset it (datasets "
                         "then go to ~/.minari/datasets), set it to a folder, or give --minari-path DIR")
    return Path(env if env is not None else os.path.join(os.path.expanduser("~"), ".minari", "datasets"))


def dataset_folder(dataset_id: str) -> Path:
    """Where Minari keeps ``dataset_id`` now (under :func:`datasets_root`)."""
    return datasets_root() / dataset_id


def is_scenario_file(scenario: str | Path) -> bool:
    """Whether ``scenario`` names a YAML file rather than a shipped scenario (the rule of
    :func:`aryl_gym.config.load_scenario`)."""
    text = str(scenario)
    return text.endswith((".yaml", ".yml")) or os.sep in text or "/" in text


def scenario_ref(scenario: str | Path) -> str:
    """The scenario as a dataset stores it: a shipped name stays a name; a YAML path becomes
    absolute (a relative ``configs/x.yaml`` is found from any folder on replay)."""
    return str(Path(scenario).resolve()) if is_scenario_file(scenario) else str(scenario)


def scenario_hash(scenario: str | Path) -> str:
    """The hash of ``scenario``'s resolved configuration (:func:`aryl_gym.provenance.config_hash`,
    as leaderboard rows record it)."""
    # at run time: the scenario loader and provenance are not needed to name a dataset
    from aryl_gym.config import load_scenario
    from aryl_gym.provenance import config_hash

    return config_hash(load_scenario(scenario))


def played_label(policy: str, env_id: str, action_mode: str, window: int) -> str:
    """How a recording is labelled: the policy *played through* the env, which shows it only the
    jobs of its window (not the policy's native episode unless the window holds every job)."""
    return f"{policy} played through {env_id} ({action_mode} actions, window {int(window)})"


def check_scenario(metadata: Any, dataset_id: str) -> None:
    """Refuse a dataset whose scenario file's configuration is no longer the one it was recorded
    in (its stored ``config_hash``): a ValueError saying so and how to fix it. A shipped scenario
    name, a dataset without a stored hash (written before it was stored) and a scenario file that
    is not here (nothing to compare; rebuilding its env fails on its own) pass."""
    mine = metadata.get(NAMESPACE) if isinstance(metadata, dict) else None
    if not isinstance(mine, dict):
        return
    stored, ref = mine.get("config_hash"), mine.get("scenario")
    if not stored or not isinstance(ref, str) or not is_scenario_file(ref) or not Path(ref).is_file():
        return
    # at run time: the scenario loader (pydantic) only when a dataset is read
    from aryl_gym.config import ConfigError

    try:
        now = scenario_hash(ref)
    except ConfigError as exc:
        raise ValueError(f"Minari dataset {dataset_id}: its scenario file {ref} no longer loads ({exc}); "
                         "restore the file, or record the dataset again") from None
    if now != stored:
        raise ValueError(
            f"Minari dataset {dataset_id} was recorded in scenario {ref} with configuration hash {stored}, "
            f"but that file's configuration now hashes to {now}: the file changed since, so the episodes "
            f"are not this scenario's. Restore the file, or record the dataset again (aryl-gym demos "
            f"--format minari --scenario {ref} ... --overwrite, or another --dataset-id version)")


# ---------------------------------------------------------------------------------------------
# recording
# ---------------------------------------------------------------------------------------------
def recording_env_kwargs(scenario: str | Path, policy: str, action_mode: str, window: int,
                         data_root: str | None) -> dict[str, Any]:
    """The env's keyword arguments for recording ``policy``, all JSON (a Minari env spec is
    JSON): its loaning, placement options (a dict) and reclaim rule (the policy's name)."""
    # at run time: the agents registry imports every policy module
    from aryl_gym.envs.predict import policy_env_kwargs

    pk = policy_env_kwargs(policy)
    kw: dict[str, Any] = {
        "scenario": str(scenario),
        "action_mode": action_mode,
        "window": int(window),
        "uses_loaning": bool(pk["uses_loaning"]),
        "placement": dataclasses.asdict(pk["placement"]),
        "reclaim": policy,  # the policy's own reclaim rule (a pure function of the cluster view)
    }
    if data_root is not None:
        kw["data_root"] = str(data_root)
    return kw


@dataclass
class _Episode:
    seed: int
    obs: dict[str, list[np.ndarray]] = field(default_factory=dict)
    actions: list[np.ndarray] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    terms: list[bool] = field(default_factory=list)
    truncs: list[bool] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    #: parts of the policy's decisions the env could not express (outside the window, masked)
    not_expressed: int = 0


def _json_value(v: Any) -> Any:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(float(v)) else None
    if isinstance(v, str) or v is None:
        return v
    return str(v)


def record_episodes(env: Any, policy: str, seeds: Sequence[int]) -> list[_Episode]:
    """Play reference ``policy`` (:class:`~aryl_gym.envs.predict.HeuristicPredictor`) in
    ``env`` once per episode seed (``reset(seed=s, options={"episode_seed": s})``)."""
    # at run time: the agents registry imports every policy module
    from aryl_gym.envs.predict import HeuristicPredictor
    from aryl_gym.rollout import Step, play

    # the env's own reclaim rule (the policy's, by name) is the one a replay env gets
    agent = HeuristicPredictor(policy, env, use_policy_reclaim=False)
    out: list[_Episode] = []
    for s in seeds:
        ep = _Episode(seed=int(s))

        def add_obs(obs: Any, ep: _Episode = ep) -> None:
            for k, v in obs.items():
                ep.obs.setdefault(k, []).append(np.array(v, copy=True))

        def on_reset(obs: Any, info: dict[str, Any], ep: _Episode = ep) -> None:
            add_obs(obs)
            ep.infos.append(dict(info))

        def keep(st: Step, ep: _Episode = ep) -> None:
            add_obs(st.next_obs)
            # an index (sequential), or one entry per window slot (targets, priority): was cast
            # to one int, so those modes failed with a numpy reshape error
            ep.actions.append(np.array(st.action, copy=True))
            ep.rewards.append(float(st.reward))
            ep.terms.append(bool(st.terminated))
            ep.truncs.append(bool(st.truncated))
            ep.infos.append(dict(st.info))

        before = agent.skipped
        ro = play(agent, env, seed=int(s), options={"episode_seed": int(s)}, on_reset=on_reset, on_step=keep)
        ep.metrics = {k: _json_value(v) for k, v in dict(ro.info.get("episode_metrics", {})).items()}
        ep.not_expressed = int(agent.skipped - before)
        out.append(ep)
    return out


def _infos(ep: _Episode, components: Sequence[str]) -> dict[str, Any]:
    """Minari's info layout: one list per key, one entry per observation (reset first)."""
    out: dict[str, Any] = {}
    for k in components:
        out[f"reward_{k}"] = [float(i.get("reward_components", {}).get(k, 0.0)) for i in ep.infos]
    for k in INFO_FLOAT:
        out[k] = [float(i.get(k, 0.0)) for i in ep.infos]
    for k in INFO_INT:
        out[k] = [int(i.get(k, 0)) for i in ep.infos]
    if all("window" in i for i in ep.infos):
        out["window"] = np.stack([np.asarray(i["window"], dtype=np.int64) for i in ep.infos])
    return out


def _check_writable(folder: Path) -> None:
    """A ValueError, before any episode is recorded, when ``folder`` cannot be made (was: a
    datasets folder that is a file, or read-only, failed in Minari after every episode ran)."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        why = "is not a folder" if not probe.is_dir() else "is not writable"
        raise ValueError(f"cannot write Minari dataset folder {folder}: {probe} {why}; give a writable "
                         "--minari-path (or $MINARI_DATASETS_PATH)")


def _dataset_ids_in(folder: Path, root: Path) -> list[str]:
    """The ids of the datasets stored below ``folder`` (each a folder holding
    ``data/metadata.json``), ``folder``'s own left out."""
    own = folder / "data"
    found = []
    for md in sorted(folder.rglob("metadata.json")):
        if md.parent.name == "data" and md.parent != own and own not in md.parents:
            found.append(md.parent.parent.relative_to(root).as_posix())
    return found


def check_not_nested(dataset_id: str) -> None:
    """A ValueError when dataset ``dataset_id`` would sit inside another dataset's folder
    (``a/b-v0/c-v0`` in ``a/b-v0``), or when its folder holds other datasets: replacing the outer
    one (``--overwrite``) deletes its whole folder, the inner ones with it. Was: both written, and
    an overwrite of the outer dataset deleted the inner ones without a word."""
    folder = dataset_folder(dataset_id)
    root = datasets_root()
    parts = [x for x in dataset_id.split("/") if x]
    for i in range(1, len(parts)):
        outer = "/".join(parts[:i])
        if (root / outer / "data" / "metadata.json").is_file():
            raise ValueError(
                f"Minari dataset id {dataset_id} would sit inside dataset {outer}'s folder ({root / outer}), "
                f"and replacing {outer} would delete it; datasets do not nest: give an id outside it "
                f"(e.g. {outer}-{parts[-1]})")
    if folder.is_dir():
        inner = _dataset_ids_in(folder, root)
        if inner:
            raise ValueError(
                f"Minari dataset {dataset_id}: its folder {folder} holds other datasets ({', '.join(inner)}), "
                f"which writing {dataset_id} there (or replacing it) would delete or bury; datasets do not "
                "nest: give another --dataset-id, or move those datasets out first")


def write_dataset(
    dataset_id: str,
    scenario: str | Path,
    policy: str,
    episodes: int,
    seed: int,
    action_mode: str = "sequential",
    window: int = 16,
    data_root: str | None = None,
    author: str = "aryl-gym",
    overwrite: bool = False,
    description: str | None = None,
) -> Any:
    """Record ``episodes`` episodes of ``policy`` (episode seeds ``seed``, ``seed + 1``, ...) and
    write them as Minari dataset ``dataset_id`` (under ``$MINARI_DATASETS_PATH``); returns the
    :class:`minari.MinariDataset`. An existing dataset is an error unless ``overwrite``."""
    minari = require_minari()
    # at run time: minari is the offline extra; the env registry and the leaderboard's
    # provenance are not needed to read a dataset id
    import gymnasium as gym
    from minari.data_collector import EpisodeBuffer

    from aryl_gym import __version__
    from aryl_gym.envs import DEFAULT_ENV_ID
    from aryl_gym.provenance import git_commit

    check_dataset_id(dataset_id)
    check_not_nested(dataset_id)
    folder = dataset_folder(dataset_id)
    if folder.exists():
        if not overwrite:
            raise ValueError(f"Minari dataset {dataset_id} exists ({folder}); pass --overwrite to replace "
                             "it, or record under another version (--dataset-id ...-v1)")
    _check_writable(folder)
    # as the user typed it, a relative path failed on replay from another folder; and without the
    # configuration's hash an edited file went unnoticed
    scenario = scenario_ref(scenario)
    cfg_hash = scenario_hash(scenario)
    label = played_label(policy, DEFAULT_ENV_ID, action_mode, window)
    env_kwargs = recording_env_kwargs(scenario, policy, action_mode, window, data_root)
    env = gym.make(DEFAULT_ENV_ID, **env_kwargs)
    try:
        seeds = list(range(int(seed), int(seed) + int(episodes)))
        eps = record_episodes(env, policy, seeds)
        components = sorted({k for ep in eps for i in ep.infos for k in i.get("reward_components", {})})
        buffers = [
            EpisodeBuffer(
                id=n, seed=ep.seed, options={"episode_seed": ep.seed},
                observations={k: np.stack(v) for k, v in ep.obs.items()},
                actions=np.asarray(ep.actions, dtype=env.action_space.dtype), rewards=ep.rewards,
                terminations=ep.terms, truncations=ep.truncs, infos=_infos(ep, components))
            for n, ep in enumerate(eps)
        ]
        opts = env.unwrapped.options  # type: ignore[attr-defined]  # ArylEnv's EnvOptions
        # the spec as JSON: the registered vector entry point (a callable) is not part of it
        assert env.spec is not None  # made by gym.make
        spec = dataclasses.replace(env.spec, vector_entry_point=None)
        # the whole dataset, its metadata included, is written in a hidden folder of the datasets
        # root and then renamed into place (:func:`_publish`). Was: written in place, so a run
        # killed after Minari's files but before the aryl_gym metadata left a dataset that read as
        # complete (no scenario hash, so never checked), and a second writer of the same id, on
        # finding the first one's dataset there, deleted it while cleaning up after itself
        root = datasets_root()
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".aryl-gym-writing-", dir=root))
        try:
            with datasets_path(staging), warnings.catch_warnings():
                # the commit is in the metadata (aryl_gym.code_commit); no e-mail is asked for
                warnings.filterwarnings("ignore", message=".*(code_permalink|author_email).*")
                staged = minari.create_dataset_from_buffers(
                    dataset_id, buffers, env=spec, eval_env=spec, algorithm_name=label,
                    author=author, description=description or (
                        f"{label} on scenario {scenario}, {episodes} episodes from episode seed {seed}"),
                    requirements=[f"aryl-gym=={__version__}"], data_format="arrow")
                staged.storage.update_metadata({NAMESPACE: {
                    "scenario": scenario, "config_hash": cfg_hash, "policy": policy, "label": label,
                    "env_id": DEFAULT_ENV_ID, "action_mode": action_mode, "window": int(window),
                    "decisions_not_expressed": sum(ep.not_expressed for ep in eps),
                    "world_version": str(opts.world_version), "episode_seeds": seeds,
                    "reward_components": components, "aryl_gym_version": __version__,
                    "code_commit": git_commit(dirty=True)}})
                staged.storage.update_episode_metadata(
                    [{"episode_metrics": ep.metrics, "decisions_not_expressed": ep.not_expressed} for ep in eps],
                    range(len(eps)))
            # overwrite: the old dataset goes only now, once the new one is complete
            _publish(staging, dataset_id, overwrite)
        finally:
            shutil.rmtree(staging, ignore_errors=True)  # no half-written dataset
    finally:
        env.close()
    return minari.load_dataset(dataset_id)


def _publish(staging: Path, dataset_id: str, overwrite: bool) -> None:
    """Move dataset ``dataset_id``, complete in the datasets root ``staging``, into place under
    :func:`datasets_root` with one rename (readers see the whole dataset or none of it). The
    namespace metadata Minari wrote in ``staging`` is copied where it is missing. A dataset of
    that id that appeared meanwhile (another writer) is a ValueError unless ``overwrite``, which
    replaces it (the last writer wins, with a whole dataset: never a mixture of two)."""
    root = datasets_root()
    src, dst = staging / dataset_id, root / dataset_id
    dst.parent.mkdir(parents=True, exist_ok=True)
    parts = dataset_id.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        ns = "/".join(parts[:i])
        mine, theirs = staging / ns / "namespace_metadata.json", root / ns / "namespace_metadata.json"
        if mine.is_file() and not theirs.exists():
            with contextlib.suppress(OSError):
                shutil.copyfile(mine, theirs)
    trash: list[Path] = []
    try:
        for _ in range(100):
            try:
                os.rename(src, dst)
                return
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
                    raise
            if not overwrite:
                raise ValueError(
                    f"Minari dataset {dataset_id} exists ({dst}): it was written by another writer while this "
                    "one recorded, and is left as it is; pass --overwrite to replace it, or record under "
                    "another version (--dataset-id ...-v1)")
            old = Path(tempfile.mkdtemp(prefix=".aryl-gym-replaced-", dir=root))
            trash.append(old)
            with contextlib.suppress(FileNotFoundError):  # another writer moved it first
                os.rename(dst, old / "old")
        raise ValueError(f"Minari dataset {dataset_id}: could not move it into place ({dst}): other writers "
                         "keep replacing it")
    finally:
        for old in trash:
            shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# reading, for behaviour cloning
# ---------------------------------------------------------------------------------------------
def is_minari_ref(text: str | Path) -> bool:
    """``minari:ID``, or an id of Minari's form (``NAMESPACE/NAME-vN``) that is no file and is a
    local dataset."""
    s = str(text)
    if s.startswith(MINARI_PREFIX):
        return True
    if Path(s).exists() or not _ID_RE.fullmatch(s):
        return False
    return (dataset_folder(s) / "data" / "metadata.json").is_file()


def minari_id(text: str | Path) -> str:
    s = str(text)
    return s[len(MINARI_PREFIX):] if s.startswith(MINARI_PREFIX) else s


def load_dataset(ref: str | Path) -> Any:
    """``minari.load_dataset`` of ``ref`` (``minari:ID`` or ``ID``), checked against its scenario
    (:func:`check_scenario`): a missing dataset is a FileNotFoundError, a scenario file changed
    since the recording a ValueError."""
    dataset_id = minari_id(ref)
    minari = require_minari()
    try:
        ds = minari.load_dataset(dataset_id)
    except (FileNotFoundError, ValueError) as exc:
        if (dataset_folder(dataset_id) / "data" / "metadata.json").is_file():  # was: "not found"
            raise ValueError(f"Minari dataset {dataset_id} ({dataset_folder(dataset_id)}) is damaged: its "
                             f"metadata does not load ({exc}); record it again with `aryl-gym demos --format "
                             "minari ... --overwrite`") from None
        raise FileNotFoundError(
            f"Minari dataset {dataset_id}: not found under {dataset_folder(dataset_id).parent} ({exc}); "
            "record one with `aryl-gym demos --format minari` or set MINARI_DATASETS_PATH") from None
    check_scenario(ds.storage.metadata, dataset_id)
    return ds


def recover_environment(dataset: Any, eval_env: bool = False, **kwargs: Any) -> Any:
    """The env a dataset was recorded in (``dataset``: a :class:`minari.MinariDataset`, or its
    id), as ``dataset.recover_environment()`` builds it, after :func:`check_scenario`: a scenario
    file changed since the recording is a ValueError, not an env that replays other episodes."""
    if isinstance(dataset, (str, Path)):
        ds = load_dataset(dataset)  # checked
    else:
        ds = dataset
        check_scenario(ds.storage.metadata, str(ds.id))
    return ds.recover_environment(eval_env=eval_env, **kwargs)


def _episodes(ds: Any, dataset_id: str) -> Iterator[Any]:
    """``ds.iterate_episodes()``; a missing or cut episode file is a ValueError naming the
    dataset (was: a bare path, or pyarrow's "Not an Arrow file")."""
    try:
        yield from ds.iterate_episodes()
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise ValueError(f"Minari dataset {dataset_id} ({dataset_folder(dataset_id)}) is damaged: an episode "
                         f"does not load ({type(exc).__name__}: {exc}); record it again with `aryl-gym demos "
                         "--format minari ... --overwrite`") from None


def load_minari_demos(ref: str | Path) -> dict[str, Any]:
    """A Minari dataset as the demonstrations of :func:`aryl_gym.train.bc.load_demos`: one row per
    step (the observation the action was chosen on; each episode's last observation dropped):
    ``obs`` (a dict, one array per key), ``actions``, ``masks`` (``obs["action_mask"] > 0.5``),
    ``rewards`` and ``dones`` (terminated or truncated)."""
    ds = load_dataset(ref)
    dataset_id = minari_id(ref)
    obs: dict[str, list[np.ndarray]] = {}
    actions, rewards, dones = [], [], []
    for ep in _episodes(ds, dataset_id):
        o = ep.observations
        if not isinstance(o, dict):
            o = {"obs": o}
        for k, v in o.items():
            obs.setdefault(k, []).append(np.asarray(v)[:-1])
        actions.append(np.asarray(ep.actions))
        rewards.append(np.asarray(ep.rewards, dtype=np.float64))
        dones.append(np.asarray(ep.terminations, dtype=bool) | np.asarray(ep.truncations, dtype=bool))
    if not actions:
        raise ValueError(f"Minari dataset {dataset_id}: no episodes")
    out_obs = {k: np.concatenate(v) for k, v in obs.items()}
    masks = out_obs["action_mask"] > 0.5 if "action_mask" in out_obs else None
    return {"obs": out_obs, "actions": np.concatenate(actions), "masks": masks,
            "rewards": np.concatenate(rewards).astype(np.float32), "dones": np.concatenate(dones)}


def summary(ds: Any) -> dict[str, Any]:
    """What ``aryl-gym demos --format minari --json`` prints about a written dataset."""
    md = ds.storage.metadata
    return {"dataset_id": md["dataset_id"], "path": str(dataset_folder(md["dataset_id"])),
            "episodes": int(md["total_episodes"]), "steps": int(md["total_steps"]),
            **{k: md.get(NAMESPACE, {}).get(k) for k in (
                "policy", "label", "env_id", "action_mode", "window", "decisions_not_expressed", "scenario",
                "config_hash", "world_version")}}


__all__ = [
    "MINARI_PREFIX", "NAMESPACE", "check_dataset_id", "check_not_nested", "check_scenario", "datasets_path",
    "datasets_root", "default_dataset_id",
    "is_minari_ref", "is_scenario_file", "load_dataset", "load_minari_demos", "minari_id", "played_label",
    "record_episodes", "recording_env_kwargs", "recover_environment", "scenario_hash", "scenario_ref",
    "summary", "write_dataset",
]
