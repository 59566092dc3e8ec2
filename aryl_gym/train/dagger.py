"""DAgger on the deployed policy: the student's *argmax* states, labelled by the demonstrator.

The shipped agents act by the masked argmax of their policy, while PPO and the kickstarting
teacher (:mod:`aryl_gym.train.teacher`) see the states of the *sampled* policy. The two visit
different states: an argmax policy can fall into a cycle the sampled one leaves at once (a
preemption at one decision point, the regrant at the next, round after round; the simulator ends
such an episode by its thrash rule, docs/simulator.md). DAgger (Ross et al., AISTATS '11) on
the deterministic student closes that gap: each round plays the current student greedily in the
training env (worlds included) on fresh episode seeds, labels every visited state with the
demonstrator's action there (:class:`~aryl_gym.train.teacher.TeacherLabeler`), adds them to
the aggregate (which starts from the behaviour-cloning demonstrations) and takes ``epochs``
passes of masked cross-entropy on the whole aggregate (:func:`aryl_gym.train.bc.pretrain`, no
value regression). After each round the student is evaluated like a checkpoint of the RL phase
(the run's evaluation seeds); a round that is better and leaves no job unfinished becomes
``best_model.zip``.

Configured by the ``dagger:`` section of a training config (:class:`~aryl_gym.train.config.
DaggerConfig`); it runs after the RL phase, from the best model so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aryl_gym.offline import is_minari_ref
from aryl_gym.rollout import ActAgent, Step, play, result_from_info
from aryl_gym.train.bc import load_demos, pretrain
from aryl_gym.train.config import config_from_run_dict, dagger_worlds
from aryl_gym.train.envs import make_single_env

#: demonstration keys that belong to one recording only (returns would mix the demonstrator's
#: rewards with the student's): dropped from the aggregate
_PER_RUN_KEYS = ("rewards", "dones", "terminated", "truncated")


def collect_student_states(
    model: Any, env: Any, teacher: str, seeds: Sequence[int], out: str | Path
) -> dict[str, float]:
    """Play ``model``'s masked argmax on ``env`` for the episode ``seeds``; write every visited
    state with the ``teacher``'s label there to ``out`` (the layout of :func:`aryl_gym.train.bc.
    load_demos`: ``obs/KEY``, ``actions`` = the labels, ``masks``). Returns the steps, the share
    of steps where the student's action was the label, the episodes ended by the thrash rule and
    the mean avg JCT."""
    # fast imports sb3_contrib: imported when used
    from aryl_gym.train.fast import fast_predictor

    # teacher imports sb3_contrib: imported when used
    from aryl_gym.train.teacher import TeacherLabeler

    labeler = TeacherLabeler(teacher, env)
    student = fast_predictor(model)  # the deployed masked argmax
    obs_buf: dict[str, list[np.ndarray]] = {}
    labels: list[int] = []
    masks: list[np.ndarray] = []
    agree = 0
    thrash = 0
    jcts: list[float] = []
    label = [0]

    def act(obs: Any, m: np.ndarray) -> int:
        label[0] = labeler.label()  # the teacher's action in this state, before the student's step
        a, _ = student.predict({k: np.asarray(v)[None] for k, v in obs.items()},
                               deterministic=True, action_masks=m[None])
        return int(np.asarray(a).reshape(-1)[0])

    def keep(st: Step) -> None:
        nonlocal agree
        for k, v in st.obs.items():
            obs_buf.setdefault(k, []).append(np.asarray(v))
        labels.append(label[0])
        masks.append(np.asarray(st.mask, dtype=bool))
        agree += int(st.action == label[0])

    model.policy.set_training_mode(False)
    agent = ActAgent(env, act, masks=True)
    for s in seeds:
        ro = play(agent, env, seed=int(s), options={"episode_seed": int(s)}, on_step=keep)
        res = result_from_info(ro.info)
        if res is not None:
            thrash += int(res.thrashing)
            jcts.append(res.avg_jct)
    arrays = {f"obs/{k}": np.stack(v) for k, v in obs_buf.items()}
    arrays["actions"] = np.asarray(labels, dtype=np.int64)
    arrays["masks"] = np.stack(masks)
    np.savez(out, **arrays)  # type: ignore[arg-type]
    n = len(labels)
    return {"steps": float(n), "agreement": agree / max(n, 1), "thrashing": float(thrash),
            "avg_jct": float(np.mean(jcts)) if jcts else float("nan")}


def aggregate(paths: Sequence[str | Path], out: str | Path) -> int:
    """Concatenate demonstration files (same keys) into ``out``; returns the number of rows. A
    Minari dataset (``minari:ID``) enters in the layout of the rounds' files."""
    data = [_demo_arrays(p) for p in paths]
    keys = [k for k in data[0] if k not in _PER_RUN_KEYS]
    for p, d in zip(paths, data):
        missing = [k for k in keys if k not in d]
        if missing:
            raise ValueError(f"{p}: keys {missing} missing (all aggregated files need the same observation keys)")
    arrays = {k: np.concatenate([d[k] for d in data]) for k in keys}
    np.savez(out, **arrays)  # type: ignore[arg-type]
    return int(len(arrays["actions"]))


def _demo_arrays(path: str | Path) -> dict[str, np.ndarray]:
    """A demonstrations file's arrays by name (a Minari dataset as ``obs/KEY``, ``actions``,
    ``masks``)."""
    if is_minari_ref(path):
        obs, actions, masks = load_demos(path)
        assert isinstance(obs, dict)  # a Minari dataset of this env: Dict observations
        out = {f"obs/{k}": v for k, v in obs.items()}
        out["actions"] = np.asarray(actions, dtype=np.int64)
        if masks is not None:
            out["masks"] = masks
        return out
    with np.load(path, allow_pickle=False) as d:
        return {k: d[k] for k in d.files}


def rollout_config(cfg: Any, worlds: Any = None) -> Any:
    """The config a state-collecting rollout env is made from (DAgger's, rollout labels'): the
    training env with ``worlds`` (default: ``dagger.worlds`` merged into the training worlds)
    and no reward wrappers (the rollouts keep states and labels only, so the reference runs of
    ``reward_reference`` / ``pair_baseline`` would be wasted)."""

    return cfg.replace(worlds=dagger_worlds(cfg) if worlds is None else worlds, reward_reference=None,
                       pair_baseline="none", pair_group=0)


class RolloutEnvFactory:
    """Picklable maker of a learned agent's rollout env: its training config's worlds, no
    reward wrappers (:func:`rollout_config`), the raw policy's env (no ``deploy_env_kwargs``).
    The rollout-label and evolution-strategy experiments (experiments/08-rollout-labels,
    experiments/10-evolution-strategies) play agents in it."""

    def __init__(self, config: dict[str, Any], env_id: str, source: str = "agent config"):
        self.config = dict(config)
        self.env_id = str(env_id)
        self.source = source
        self._cfg: Any = None

    @classmethod
    def for_agent(cls, agent: Any) -> RolloutEnvFactory:
        if not agent.config:
            raise ValueError(f"{agent.name}: no training config beside the model (config.yaml); "
                             "its training worlds are unknown")
        return cls(dict(agent.config), agent.env_id, f"{agent.name} config")

    def __call__(self) -> Any:
        if self._cfg is None:
            cfg = config_from_run_dict(self.config, source=self.source)
            self._cfg = cfg.replace(env_id=self.env_id)
        return make_single_env(rollout_config(self._cfg, worlds=self._cfg.worlds))

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "env_id": self.env_id, "source": self.source, "_cfg": None}


def run_dagger(
    model: Any,
    cfg: Any,
    run_dir: Path,
    demos: str | None,
    evaluate: Callable[[Any, int], dict[str, float]] | None,
    data_root: str | None = None,
    log: Callable[[str], None] | None = None,
) -> list[dict[str, float]]:
    """``cfg.dagger.rounds`` rounds of DAgger on ``model`` (changed in place); each round's data
    is written to ``run_dir/dagger/``. ``evaluate(model, timesteps)`` scores the student after
    each round (the run's evaluation); returns one row of figures per round."""

    dc = cfg.dagger
    teacher = dc.policy or cfg.teacher.policy or cfg.bc.policy
    if not teacher:
        raise ValueError("dagger needs a demonstrator: set dagger.policy (or teacher.policy / bc.policy)")
    say = log or (lambda s: None)
    folder = run_dir / "dagger"
    folder.mkdir(parents=True, exist_ok=True)
    env = make_single_env(rollout_config(cfg), data_root)
    parts: list[str] = [demos] if demos else []
    steps_total = int(model.num_timesteps)
    rows: list[dict[str, float]] = []
    try:
        for r in range(int(dc.rounds)):
            tic = time.perf_counter()
            seeds = range(int(dc.seed) + r * int(dc.episodes), int(dc.seed) + (r + 1) * int(dc.episodes))
            path = folder / f"round{r}.npz"
            st = collect_student_states(model, env, teacher, seeds, path)
            parts.append(str(path))
            agg = folder / "aggregate.npz"
            n = aggregate(parts, agg)
            fit = pretrain(model, agg, epochs=int(dc.epochs), batch_size=int(dc.batch_size),
                           learning_rate=float(dc.learning_rate))
            steps_total += int(st["steps"])
            row = {"round": float(r + 1), "timesteps": float(steps_total), "collected": st["steps"],
                   "aggregate": float(n), "agreement": st["agreement"],
                   "thrashing_episodes": st["thrashing"], "train_avg_jct": st["avg_jct"],
                   "accuracy": fit["accuracy"], "wall_s": time.perf_counter() - tic}
            for k in ("agreement", "thrashing_episodes", "accuracy", "collected"):
                model.logger.record(f"dagger/{k}", row[k])
            model.num_timesteps = steps_total
            if evaluate is not None:
                ev = evaluate(model, steps_total)
                row["eval_avg_jct"] = ev.get("avg_jct", float("nan"))
                row["eval_jobs_unfinished"] = ev.get("jobs_unfinished", float("nan"))
            else:
                model.logger.dump(steps_total)
            model.save(folder / f"model_round{r}.zip")
            rows.append(row)
            say(f"dagger round {r + 1}/{dc.rounds}: {int(st['steps']):,} student states (agreement "
                f"{st['agreement']:.3f}, {int(st['thrashing'])} thrashing episodes), aggregate {n:,}, "
                f"accuracy {fit['accuracy']:.3f}, eval avg JCT {row.get('eval_avg_jct', float('nan')):,.0f} s "
                f"[{row['wall_s']:.0f} s]")
    finally:
        env.close()
    return rows
