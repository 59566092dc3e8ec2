"""``aryl-gym train --backend rllib``: PPO with action masks through RLlib's current API stack
(``RLModule`` / ``Learner`` / ``EnvRunner``), env runners on as many processes or machines as
Ray has.

* The same algorithm config as the SB3 path (``configs/algos/maskable_ppo.yaml``, keyed by
  scenario): :func:`rllib_settings` maps its MaskablePPO hyperparameters to RLlib's PPO
  (``n_steps * n_envs`` -> ``train_batch_size_per_learner``, ``batch_size`` ->
  ``minibatch_size``, ...) and rejects, by name, every setting that has no RLlib counterpart
  here (a set policy, behaviour cloning, a teacher, DAgger, trace pairing, normalisation).
* The network: :class:`aryl_gym.train.rllib_module.MaskedPPOTorchModule`, the actor-critic of
  SB3's ``MultiInputPolicy`` (every observation key flattened; separate policy and value
  networks) whose logits of refused actions are set to a large negative number.
* The envs: :func:`aryl_gym.train.envs.make_single_env` (worlds and reward wrappers included)
  on every env runner, ``n_envs`` of them per runner; ``num_env_runners`` runner processes
  (0: sampling in the driver), placed by Ray on any node of its cluster (``RAY_ADDRESS``).
* The run folder is the SB3 path's (``config.yaml``, ``args.json``, ``commit.txt``, ``tb/``,
  ``eval.csv``, ``summary.json``) with RLlib's checkpoints (``checkpoints/rllib_{N}_steps/``,
  each an ``Algorithm`` checkpoint: resume with ``--resume``), the final RLModule ``module/``
  and the best one by evaluation ``best_module/``, and ``rllib.json`` (what made the run).
* TensorBoard: ``cluster/`` as the SB3 path logs it (the same tags, from
  :class:`aryl_gym.train.rllib_module.ClusterMetrics` on the env runners), ``eval/`` from the
  same held-out protocol (:func:`aryl_gym.rollout.run_agent_batch` on ``eval.seeds``, the
  references run natively on the same seeds), ``rollout/``, ``train/`` (RLlib's learner
  figures) and ``time/fps``.
* :class:`aryl_gym.agents.learned.RLlibAgent` (``aryl_gym.agents.learned.load_rllib_agent``): a trained RLModule as an
  SB3-style agent (masked argmax), which ``aryl_gym.agents.learned.load_agent`` returns for an
  RLlib run folder or checkpoint, so ``aryl-gym evaluate`` and the leaderboard take RLlib runs
  like SB3 runs.

Nothing here imports ray or torch at import time (``import aryl_gym`` never imports this
module either); :mod:`aryl_gym.train.rllib_module` holds the classes that need them.
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from aryl_gym.agents.learned import (
    RLLIB_MARKER,
    RLlibAgent,
    rllib_checkpoints,
    run_dir_of,
)
from aryl_gym.commands._common import strict_json
from aryl_gym.config import ConfigError
from aryl_gym.extras import rllib_unavailable
from aryl_gym.fileio import DirLock, claim_folder
from aryl_gym.train.config import TrainConfig, config_from_run_dict, scenario_key
from aryl_gym.train.envs import EnvFactory, make_single_env, train_scenario
from aryl_gym.train.evaluation import (
    eval_row,
    is_new_best,
    mean_metrics,
    run_agent_batch,
    run_reference,
)
from aryl_gym.train.runner import RunResult, git_commit

#: the env name registered with Ray's registry (the creator builds the config's env)
ENV_NAME = "aryl_gym_rllib"
#: the run name's algorithm part (``{scenario}__rllib_ppo__{seed}__{time}``)
RUN_ALGO = "rllib_ppo"

#: MaskablePPO hyperparameter -> RLlib PPO ``training()`` argument (same meaning)
HYPERPARAMS = {
    "learning_rate": "lr",
    "batch_size": "minibatch_size",
    "n_epochs": "num_epochs",
    "gamma": "gamma",
    "gae_lambda": "lambda_",
    "ent_coef": "entropy_coeff",
    "clip_range": "clip_param",
    "vf_coef": "vf_loss_coeff",
    "max_grad_norm": "grad_clip",
}
#: hyperparameters read elsewhere: n_steps (the rollout: n_steps * n_envs per update)
_OTHER_HYPERPARAMS = ("n_steps",)


# ---------------------------------------------------------------------------------------------
# the config
# ---------------------------------------------------------------------------------------------
def rllib_settings(cfg: TrainConfig) -> dict[str, Any]:
    """What the RLlib run is made of, from the SB3 config ``cfg``: ``{"training": PPO's
    training() arguments, "model_config": the RLModule's, "num_envs_per_env_runner": n,
    "train_batch_size": rollout steps per update}``. A setting without a counterpart here is a
    ConfigError naming it."""
    where = f"the RLlib backend ({cfg.algo} config, scenario {cfg.scenario})"
    if cfg.algo != "maskable_ppo":
        raise ConfigError(f"{where}: trains PPO with action masks: give a maskable_ppo config "
                          f"(e.g. --config maskable_ppo), not algo {cfg.algo!r}")
    mode = cfg.env_kwargs.get("action_mode", "targets")
    if mode != "sequential":
        raise ConfigError(f"{where}: needs env_kwargs.action_mode: sequential (a Discrete action "
                          f"with a mask), found {mode!r}; set --env action_mode=sequential")
    if cfg.policy not in ("MultiInputPolicy", "FastMaskableMultiInputPolicy"):
        raise ConfigError(f"{where}: policy {cfg.policy!r} has no RLlib module here; the RLlib "
                          "backend builds MultiInputPolicy's network (use a config with "
                          "policy: MultiInputPolicy, e.g. maskable_ppo)")
    unsupported = [
        ("normalize_obs", cfg.normalize_obs), ("normalize_reward", cfg.normalize_reward),
        ("pair_group", cfg.pair_group > 1), ("teacher.policy", cfg.teacher.policy),
        ("dagger.rounds", cfg.dagger.rounds > 0), ("bc.demos", cfg.bc.demos),
        ("bc.policy", cfg.bc.policy), ("init_from", cfg.init_from), ("eval.scenarios", bool(cfg.eval.scenarios)),
        ("model_class", cfg.model_class), ("critic_warmup_steps", cfg.critic_warmup_steps > 0),
        ("vec_env", cfg.vec_env != "dummy"),
    ]
    bad = [k for k, on in unsupported if on]
    if bad:
        raise ConfigError(f"{where}: {', '.join(bad)} are SB3-path features with no RLlib "
                          "counterpart here; use the SB3 backend (the default) for them, or a "
                          "config without them (e.g. --config maskable_ppo)")
    pk = dict(cfg.policy_kwargs)
    arch = pk.pop("net_arch", [64, 64])
    act = pk.pop("activation_fn", "tanh")
    if pk:
        raise ConfigError(f"{where}: policy_kwargs {', '.join(sorted(pk))} not supported (only "
                          "net_arch and activation_fn)")
    if not (isinstance(arch, list) and all(isinstance(h, int) and h > 0 for h in arch)):
        raise ConfigError(f"{where}: policy_kwargs.net_arch must be a list of layer widths "
                          f"(the same for the policy and the value network), got {arch!r}")
    if not isinstance(act, str):
        raise ConfigError(f"{where}: policy_kwargs.activation_fn must be a name (tanh, relu, ...)")
    hp = {k: v for k, v in cfg.hyperparams.items() if v is not None}  # None: SB3's "off"
    extra = sorted(set(hp) - set(HYPERPARAMS) - set(_OTHER_HYPERPARAMS))
    if extra:
        raise ConfigError(
            f"{where}: hyperparameter(s) {', '.join(extra)} have no RLlib counterpart here "
            f"(supported: {', '.join(sorted([*HYPERPARAMS, *_OTHER_HYPERPARAMS]))}); "
            + " ".join(f"--set {k}=null" for k in extra) + " turns them off")
    n_steps = int(hp.get("n_steps", 2048))
    batch = n_steps * int(cfg.n_envs)
    training: dict[str, Any] = {
        # SB3's MaskablePPO has neither a KL penalty nor a clipped value loss
        "use_kl_loss": False,
        "vf_clip_param": float("inf"),
        "train_batch_size_per_learner": batch,
    }
    for k, v in hp.items():
        if k in _OTHER_HYPERPARAMS:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            if k == "learning_rate" and isinstance(v, str) and v.startswith("lin_"):
                # a linear decay to 0 at total_timesteps, as RLlib's piecewise schedule
                start = float(v[4:])
                training["lr"] = [[0, start], [int(cfg.total_timesteps), 0.0]]
                continue
            raise ConfigError(f"{where}: hyperparameter {k}: {v!r} must be a number"
                              + (" (or lin_START)" if k == "learning_rate" else ""))
        training[HYPERPARAMS[k]] = int(v) if k in ("batch_size", "n_epochs") else float(v)
    if training.get("minibatch_size", 64) > batch:
        raise ConfigError(f"{where}: batch_size {training['minibatch_size']} exceeds the rollout "
                          f"(n_steps {n_steps} x n_envs {cfg.n_envs} = {batch})")
    return {
        "training": training,
        "model_config": {"hiddens": list(arch), "activation": act.lower()},
        "num_envs_per_env_runner": int(cfg.n_envs),
        "train_batch_size": batch,
    }


def make_rllib_env(env_config: Mapping[str, Any]) -> Any:
    """Ray's env creator: the training env of the run config in ``env_config["train_config"]``
    (:func:`aryl_gym.train.envs.make_single_env`), on any env runner of any node."""
    cfg = config_from_run_dict(dict(env_config["train_config"]), "RLlib env config")
    return make_single_env(cfg, env_config.get("data_root"))


def algo_config(cfg: TrainConfig, num_env_runners: int, data_root: str | None = None) -> Any:
    """RLlib's ``PPOConfig`` for ``cfg`` (the new API stack: RLModule, Learner, EnvRunner)."""
    # ray (the rllib extra): only when a run is configured
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from aryl_gym.train.rllib_module import ClusterMetrics, MaskedPPOTorchModule

    st = rllib_settings(cfg)
    return (
        PPOConfig()
        .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .environment(ENV_NAME, env_config={"train_config": cfg.to_dict(), "data_root": data_root})
        .framework("torch")
        .env_runners(num_env_runners=int(num_env_runners),
                     num_envs_per_env_runner=st["num_envs_per_env_runner"],
                     num_cpus_per_env_runner=1, rollout_fragment_length="auto")
        .learners(num_learners=0)  # the learner trains in the driver process
        .training(**st["training"])
        .rl_module(rl_module_spec=RLModuleSpec(module_class=MaskedPPOTorchModule,
                                               model_config=st["model_config"]))
        .callbacks(ClusterMetrics)
        .debugging(seed=int(cfg.seed))
        .reporting(metrics_num_episodes_for_smoothing=100)
    )


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------
def connect_ray(num_env_runners: int | None, address: str | None = None) -> tuple[Any, bool, int]:
    """``(ray, started here?, env runners)``: connect to the cluster at ``address`` (or
    ``RAY_ADDRESS``), else start a local Ray instance with at least ``num_env_runners`` CPUs;
    the env runners default to the cluster's CPUs minus one (the driver trains), and more than
    the cluster's CPUs is an error (RLlib would wait for them forever)."""
    import ray  # the rllib extra: only when a run starts

    address = address or os.environ.get("RAY_ADDRESS") or None
    started = False
    if not ray.is_initialized():
        kw: dict[str, Any] = {"include_dashboard": False, "configure_logging": False,
                              "log_to_driver": True}
        if address:
            kw["address"] = address
        else:
            kw["num_cpus"] = max(os.cpu_count() or 1, int(num_env_runners or 0))
        try:
            ray.init(**kw)
        except ConnectionError as exc:
            raise ConfigError(f"cannot connect to the Ray cluster at {address!r} ({exc}); start it "
                              "with `ray start --head` or fix RAY_ADDRESS") from None
        started = True
    cpus = int(ray.cluster_resources().get("CPU", 1))
    n = max(cpus - 1, 0) if num_env_runners is None else int(num_env_runners)
    if n > cpus:
        if started:
            ray.shutdown()
        raise ConfigError(f"--num-env-runners {n}: the Ray cluster has {cpus} CPUs, one per env "
                          f"runner; give at most {cpus} or add nodes (`ray start --address ...`)")
    return ray, started, n


def new_rllib_run_dir(cfg: TrainConfig, out: str | Path) -> Path:
    """A fresh run folder ``{out}/{scenario}__rllib_ppo__{seed}__{time}`` (as the SB3 path's)."""
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot create the folder: {exc.strerror or exc}") from None
    claim_folder(Path(out), "train")
    base = Path(out) / f"{scenario_key(cfg.scenario)}__{RUN_ALGO}__{cfg.seed}__{time.strftime('%Y%m%d-%H%M%S')}"
    d, i = base, 1
    while d.exists():
        d = Path(f"{base}-{i}")
        i += 1
    d.mkdir(parents=True)
    return d


class _TB:
    """tensorboardX's SummaryWriter on ``tb/`` (comes with ray[rllib])."""

    def __init__(self, folder: Path):
        from tensorboardX import SummaryWriter  # comes with ray[rllib]; imports torch

        self.w = SummaryWriter(str(folder))

    def scalar(self, tag: str, value: Any, step: int) -> None:
        try:
            v = float(value)
        except (TypeError, ValueError):
            return
        if math.isfinite(v):
            self.w.add_scalar(tag, v, step)

    def close(self) -> None:
        self.w.flush()
        self.w.close()


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


#: RLlib learner figure -> the SB3 path's tag under ``train/``
_LEARNER_TAGS = {"policy_loss": "policy_gradient_loss", "vf_loss": "value_loss",
                 "entropy": "entropy_loss", "mean_kl_loss": "approx_kl",
                 "vf_explained_var": "explained_variance", "total_loss": "loss",
                 "curr_entropy_coeff": "ent_coef", "default_optimizer_learning_rate": "learning_rate"}


def log_iteration(tb: _TB, result: Mapping[str, Any], steps: int, counters: dict[str, int]) -> dict[str, float]:
    """One ``algo.train()`` result to TensorBoard: ``cluster/`` (exact means over the training
    episodes that ended in the iteration), ``rollout/``, ``train/``; returns the cluster means."""
    er = result.get("env_runners", {}) or {}
    sums, ns = er.get("cluster_sum", {}) or {}, er.get("cluster_n", {}) or {}
    means: dict[str, float] = {}
    for tag, n in ns.items():
        if n and tag in sums:
            means[tag] = float(sums[tag]) / float(n)
            tb.scalar(f"cluster/{tag}", means[tag], steps)
    counters["episodes"] += int(sums.get("episodes", 0) or 0)
    counters["thrashing"] += int(sums.get("thrashing_episodes", 0) or 0)
    if counters["episodes"]:
        tb.scalar("cluster/episodes", counters["episodes"], steps)
        tb.scalar("cluster/thrashing_episodes", counters["thrashing"], steps)
    tb.scalar("rollout/ep_rew_mean", er.get("episode_return_mean"), steps)
    tb.scalar("rollout/ep_len_mean", er.get("episode_len_mean"), steps)
    learner = (result.get("learners", {}) or {}).get("default_policy", {}) or {}
    for k, tag in _LEARNER_TAGS.items():
        if k in learner:
            v = learner[k]
            tb.scalar(f"train/{tag}", -float(v) if k == "entropy" else v, steps)
    return means


class _Evaluation:
    """The SB3 path's held-out protocol for the RLlib module: the agent (masked argmax) plays
    ``eval.seeds`` through the evaluation env (:func:`aryl_gym.rollout.run_agent_batch`, each
    seed's episode ``make_episode(scenario, seed)``), the references run natively once on the
    same seeds; figures under ``eval/``, a row of ``eval.csv``, the best module (lowest avg JCT,
    every job finished) saved as ``best_module/``."""

    def __init__(self, cfg: TrainConfig, run_dir: Path, tb: _TB, data_root: str | None,
                 say: Callable[[str], None]):
        self.cfg, self.run_dir, self.tb, self.say = cfg, run_dir, tb, say
        self.seeds = [int(s) for s in cfg.eval.seeds]
        self.envs = [EnvFactory(cfg, data_root, evaluation=True)() for _ in self.seeds]
        scen = train_scenario(cfg)
        self.references = {name: mean_metrics([run_reference(name, scen, s, data_root) for s in self.seeds])
                           for name in cfg.eval.references}
        self.history: list[dict[str, float]] = []
        self.best = math.inf
        if (run_dir / "eval.csv").is_file():  # resumed: the best figure so far
            with open(run_dir / "eval.csv", newline="") as fh:
                for row in csv.DictReader(fh):
                    try:
                        self.best = min(self.best, float(row["avg_jct"]))
                    except (KeyError, ValueError):
                        pass

    def __call__(self, module: Any, steps: int) -> dict[str, float]:
        tic = time.perf_counter()
        agent = RLlibAgent("eval", module, self.cfg.to_dict())
        out = run_agent_batch(agent, self.envs, self.seeds, self.cfg.eval.deterministic)
        row, m = eval_row(out, steps, self.references, lambda tag, v: self.tb.scalar(tag, v, steps))
        row["eval_wall_s"] = time.perf_counter() - tic
        self.tb.scalar("eval/wall_s", row["eval_wall_s"], steps)
        self.history.append(row)
        self._write(row)
        if self.cfg.eval.save_best and is_new_best(m, self.best):
            self.best = m["avg_jct"]
            _save_module(module, self.run_dir / "best_module")
        refs = "  ".join(f"{k} {v.get('avg_jct', float('nan')):,.0f}" for k, v in self.references.items())
        self.say(f"eval @ {steps:,} steps: avg JCT {m['avg_jct']:,.0f} s  ({refs})  [{row['eval_wall_s']:.1f} s]")
        return row

    def _write(self, row: Mapping[str, float]) -> None:
        path = self.run_dir / "eval.csv"
        rows: list[dict[str, Any]] = []
        header: list[str] = []
        if path.is_file() and path.stat().st_size:
            with open(path, newline="") as fh:
                r = csv.DictReader(fh)
                header, rows = list(r.fieldnames or []), list(r)
        fields = header + [f for f in row if f not in header]
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", newline="") as fh:  # written aside, then renamed
            w = csv.DictWriter(fh, fieldnames=fields, restval="")
            w.writeheader()
            w.writerows(rows)
            w.writerow(dict(row))
        os.replace(tmp, path)

    def close(self) -> None:
        for e in self.envs:
            e.close()


def _rllib_path(path: Path) -> str:
    """``path`` as RLlib's checkpoint calls need it: absolute. ``save_to_path`` and
    ``restore_from_path`` hand the path to pyarrow's filesystem, which refuses a relative one
    ("URI has empty scheme"), so a run with the default ``--out runs/`` failed at its first
    checkpoint and at the end of training."""
    return str(Path(path).absolute())


def _save_module(module: Any, folder: Path) -> None:
    """An RLModule checkpoint written aside and renamed, so a kill never leaves half of one."""
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    module.save_to_path(_rllib_path(tmp))
    old = folder.with_name(folder.name + ".old")
    if folder.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(folder, old)
    os.replace(tmp, folder)
    shutil.rmtree(old, ignore_errors=True)


def _learner_module(algo: Any, template: Any) -> Any:
    """``template`` (a module of the run's spec, in the driver) with the learner's weights."""
    from ray.rllib.core import DEFAULT_MODULE_ID  # the rllib extra: during a run only

    template.set_state(algo.learner_group.get_weights([DEFAULT_MODULE_ID])[DEFAULT_MODULE_ID])
    template.eval()
    return template


def resume_checkpoint(ckpt: Path, total: int) -> tuple[Path, int, bool]:
    """``(run folder, steps, continue in a new run folder?)`` of an RLlib checkpoint
    ``RUN/checkpoints/rllib_N_steps``; a total at or below its steps is an error
    (``--timesteps`` is the run's total). A checkpoint of a run that went further continues in
    a new run folder beside ``RUN`` (as on the SB3 path), so the run's later state is kept."""
    if not (ckpt / "rllib_checkpoint.json").is_file():
        raise ConfigError(f"--resume {ckpt}: not an RLlib checkpoint folder (give "
                          "RUN/checkpoints/rllib_N_steps)")
    run = run_dir_of(ckpt)
    if run is None or not (run / "config.yaml").is_file():
        raise ConfigError(f"--resume {ckpt}: not inside an RLlib run folder (no rllib.json and "
                          "config.yaml above it)")
    try:
        steps = int(ckpt.name.split("_")[1])
    except (IndexError, ValueError):
        raise ConfigError(f"--resume {ckpt}: expected a folder named rllib_N_steps") from None
    if total <= steps:
        raise ConfigError(f"--resume {ckpt}: the checkpoint is at {steps:,} steps and --timesteps "
                          f"{total:,} is the run's total (not extra steps): nothing to train")
    return run, steps, any(n > steps for n, _ in rllib_checkpoints(run))


def train_rllib(
    cfg: TrainConfig,
    out: str | Path = "runs",
    num_env_runners: int | None = None,
    resume: str | Path | None = None,
    args: Mapping[str, Any] | None = None,
    data_root: str | None = None,
    verbose: int = 1,
    address: str | None = None,
) -> Any:
    """Train ``cfg`` with RLlib's PPO; return a :class:`aryl_gym.train.runner.RunResult`
    (``model_path`` is the final module's folder)."""
    why = rllib_unavailable()
    if why:
        raise ConfigError(why)  # names the rllib extra (a bare ModuleNotFoundError would name ray's)
    import torch  # the rllib extra: only when a run starts

    say: Callable[[str], None] = (lambda s: print(s, flush=True)) if verbose else (lambda s: None)
    settings = rllib_settings(cfg)  # a bad config fails here, before Ray starts
    try:
        make_single_env(cfg, data_root).close()
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"env_kwargs {dict(cfg.env_kwargs)}: the env rejects them: "
                          f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    ckpt = Path(resume) if resume else None
    start_steps = 0
    fresh = ckpt is None
    if ckpt is not None:
        run_dir, start_steps, fresh = resume_checkpoint(ckpt, int(cfg.total_timesteps))
        if fresh:
            say(f"{run_dir} went on beyond {start_steps:,} steps; resuming its checkpoint in a new "
                "run folder beside it (the run is left as it was)")
            out = run_dir.parent
    torch.set_num_threads(max(int(cfg.torch_threads), 1))
    ray, started, n_runners = connect_ray(num_env_runners, address)
    try:
        if fresh:
            run_dir = new_rllib_run_dir(cfg, out)
        with DirLock(run_dir, "run"):
            return _train(cfg, run_dir, ckpt, start_steps, n_runners, settings, args, data_root,
                          say, say if verbose >= 2 else (lambda s: None), RunResult, git_commit, ray)
    finally:
        if started:
            ray.shutdown()


def _train(cfg: TrainConfig, run_dir: Path, ckpt: Path | None, start_steps: int, n_runners: int,
           settings: dict[str, Any], args: Mapping[str, Any] | None, data_root: str | None,
           say: Callable[[str], None], say_iter: Callable[[str], None], RunResult: Any,
           git_commit: Any, ray: Any) -> Any:
    # torch and ray (the rllib extra): only when a run starts
    import torch
    from ray.tune.registry import register_env

    from aryl_gym.train.rllib_module import MaskedPPOTorchModule

    register_env(ENV_NAME, make_rllib_env)
    commit = git_commit()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    (run_dir / "commit.txt").write_text(commit + "\n")
    meta = {
        "args": dict(args or {}), "commit": commit, "backend": "rllib",
        "python": platform.python_version(), "torch": torch.__version__, "ray": ray.__version__,
        "num_env_runners": n_runners, "cluster_cpus": ray.cluster_resources().get("CPU"),
        "nodes": len([n for n in ray.nodes() if n.get("Alive")]),
        "host_cpus": os.cpu_count(), "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    if ckpt is not None:
        meta["resumed_from"] = str(ckpt)
    name = "args.json" if not (run_dir / "args.json").exists() else f"args-resume-{int(time.time())}.json"
    (run_dir / name).write_text(json.dumps(meta, indent=2, default=str) + "\n")
    (run_dir / RLLIB_MARKER).write_text(json.dumps({
        "backend": "rllib", "algorithm": "PPO", "ray": ray.__version__,
        "module": f"{MaskedPPOTorchModule.__module__}:{MaskedPPOTorchModule.__qualname__}",
        "settings": settings,
    }, indent=2, default=str) + "\n")

    algo = algo_config(cfg, n_runners, data_root).build_algo()
    if ckpt is not None:
        algo.restore_from_path(_rllib_path(ckpt))
        say(f"resumed {ckpt} at {start_steps:,} steps")
    probe = make_rllib_env({"train_config": cfg.to_dict(), "data_root": data_root})
    template = MaskedPPOTorchModule(observation_space=probe.observation_space,
                                    action_space=probe.action_space,
                                    model_config=settings["model_config"])
    probe.close()
    tb = _TB(run_dir / "tb")
    rows = "\n".join(f"|{k}|{str(v).replace('|', chr(92) + '|')}|" for k, v in _flat(cfg.to_dict()).items())
    tb.w.add_text("hyperparameters", "|param|value|\n|-|-|\n" + rows, start_steps)
    evaluate = _Evaluation(cfg, run_dir, tb, data_root, say) if cfg.eval.freq > 0 and cfg.eval.seeds else None
    counters = {"episodes": 0, "thrashing": 0}
    steps = start_steps
    last_eval = last_ck = start_steps
    if evaluate is not None and ckpt is None:
        evaluate(_learner_module(algo, template), steps)
    total = int(cfg.total_timesteps)
    tic = time.perf_counter()
    sampled = 0
    try:
        while steps < total:
            t0 = time.perf_counter()
            result = algo.train()
            now = int(result.get("num_env_steps_sampled_lifetime", steps))
            sampled += now - steps
            steps = now
            tb.scalar("time/fps", (result["env_runners"].get("num_env_steps_sampled", 0) or 0)
                      / max(time.perf_counter() - t0, 1e-9), steps)
            means = log_iteration(tb, result, steps, counters)
            ret = result["env_runners"].get("episode_return_mean", float("nan"))
            say_iter(f"{steps:,} steps  return {ret:.3g}"
                + (f"  avg JCT {means['avg_jct']:,.0f} s" if "avg_jct" in means else ""))
            if cfg.checkpoint_freq > 0 and steps - last_ck >= cfg.checkpoint_freq and steps < total:
                last_ck = steps
                algo.save_to_path(_rllib_path(run_dir / "checkpoints" / f"rllib_{steps}_steps"))
            if evaluate is not None and steps - last_eval >= cfg.eval.freq:
                last_eval = steps
                evaluate(_learner_module(algo, template), steps)
            if cfg.max_minutes > 0 and time.perf_counter() - tic >= cfg.max_minutes * 60:
                say(f"max_minutes {cfg.max_minutes:g} reached at {steps:,} steps")
                break
    except KeyboardInterrupt:
        ck = run_dir / "checkpoints" / f"rllib_{steps}_steps"
        algo.save_to_path(_rllib_path(ck))
        print(f"\ninterrupted at {steps:,} steps: saved {ck}; continue with\n  aryl-gym train "
              f"--backend rllib --resume {ck} --timesteps {total}", file=sys.stderr, flush=True)
        tb.close()
        algo.stop()
        raise
    wall = time.perf_counter() - tic
    module = _learner_module(algo, template)
    if evaluate is not None and (not evaluate.history or evaluate.history[-1]["timesteps"] < steps):
        evaluate(module, steps)
    algo.save_to_path(_rllib_path(run_dir / "checkpoints" / f"rllib_{steps}_steps"))
    _save_module(module, run_dir / "module")
    sps = sampled / wall if wall > 0 else 0.0
    history = evaluate.history if evaluate is not None else []
    summary = {
        "backend": "rllib", "num_timesteps": steps, "trained_steps": sampled, "wall_s": wall,
        "steps_per_s": sps, "num_env_runners": n_runners, "eval": history,
        "references": evaluate.references if evaluate is not None else {},
    }
    # strict JSON (was: NaN for an evaluation with no finished job, which strict parsers
    # refuse): a figure that is not finite is null
    (run_dir / "summary.json").write_text(strict_json(summary, indent=2) + "\n")
    if evaluate is not None:
        evaluate.close()
    tb.close()
    algo.stop()
    say(f"trained {sampled:,} steps in {wall:.0f} s ({sps:,.0f} steps/s, {n_runners} env runners); "
        f"run folder {run_dir}")
    return RunResult(run_dir, run_dir / "module", steps, wall, sps, history)


__all__: Sequence[str] = (
    "algo_config", "connect_ray", "make_rllib_env", "rllib_settings", "train_rllib",
)
