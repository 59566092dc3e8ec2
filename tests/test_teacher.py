"""The demonstrator in the loop (aryl_gym.train.teacher): labels that replay the reference policy
exactly, labels that stay valid after the agent deviates, labels aligned with the rollout buffer,
distillation that moves the policy towards them, and the config rules."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

from aryl_gym.agents import make_policy

from aryl_gym.config import ConfigError
from aryl_gym.envs.allocation import ArylEnv
from aryl_gym.envs.predict import policy_env_kwargs
from aryl_gym.scenario import make_episode
from aryl_gym.train.config import load_train_config
from aryl_gym.train.teacher import NO_LABEL, TeacherLabeler

#: fields that measure wall time or name the policy; everything else must match exactly
TIMING = {"wall_s", "decision_ms_mean", "decision_ms_max", "policy"}


def _env(policy: str, scenario: str, window: int = 128, **kw) -> ArylEnv:
    return ArylEnv(scenario=scenario, action_mode="sequential", window=window, allow_preempt=True,
                   **policy_env_kwargs(policy), **kw)


@pytest.mark.parametrize("policy,scenario,seed", [
    ("fifo", "tiny", 0), ("aryl", "tiny", 1), ("aryl", "testbed", 0), ("aryl-preempt", "testbed", 3),
])
def test_following_the_labels_replays_the_native_episode(policy, scenario, seed):
    env = _env(policy, scenario)
    labeler = TeacherLabeler(policy, env)
    env.set_reclaim(labeler.policy.reclaim)  # as the native run (the labeler leaves it alone)
    env.reset(options={"episode_seed": seed})
    while True:
        _, _, te, tr, info = env.step(labeler.label())
        if te or tr:
            break
    got = info["episode_result"].to_dict(series=True)
    want = make_episode(scenario, seed).simulator().run(make_policy(policy)).to_dict(series=True)
    diff = {k: (got[k], want[k]) for k in want if k not in TIMING and got[k] != want[k]}
    assert not diff, diff
    if policy == "aryl-preempt":
        assert info["episode_result"].jobs_completed == info["episode_result"].jobs_total


def test_labels_stay_allowed_after_the_agent_deviates():
    # the agent deviates (a random allowed action 30% of the time): at every sub-step the label
    # is still an allowed action of the env
    env = _env("aryl-preempt", "testbed", window=32)
    labeler = TeacherLabeler("aryl-preempt", env)
    rng = np.random.default_rng(0)
    env.reset(options={"episode_seed": 11})
    checked = 0
    for _ in range(600):
        m = env.action_masks()
        lab = labeler.label()
        assert m[lab], "a label must be an allowed action"
        a = int(rng.choice(np.flatnonzero(m))) if rng.random() < 0.3 else lab
        _, _, te, tr, _ = env.step(a)
        checked += 1
        if te or tr:
            env.reset(options={"episode_seed": 12})
    assert checked == 600


def test_labels_in_the_vec_env_belong_to_the_state_the_action_was_taken_in():
    from stable_baselines3.common.env_util import make_vec_env

    from aryl_gym.train.fast import ArylVecEnv

    venv = make_vec_env("aryl_gym/Aryl-v1", n_envs=2, seed=3, vec_env_cls=ArylVecEnv,
                        vec_env_kwargs={"teacher": "aryl"},
                        env_kwargs={"scenario": "tiny", "action_mode": "sequential", "window": 16})
    obs = venv.reset()
    twins = [TeacherLabeler("aryl", venv.envs[i]) for i in range(2)]
    for _ in range(80):
        want = [t.label() for t in twins]  # computed on the states the actions are taken in
        masks = obs["action_mask"] > 0.5
        acts = np.array([int(np.flatnonzero(m)[0]) for m in masks])  # not the teacher's
        obs, _, _, infos = venv.step(acts)
        assert [i["teacher_action"] for i in infos] == want


def _teacher_cfg(**over):
    base = {"total_timesteps": 1024, "eval": {"freq": 0}, "checkpoint_freq": 0,
            "critic_warmup_steps": 0, "teacher": {"policy": "aryl", "coef": 1.0, "epochs": 4,
                                                  "learning_rate": 3e-3}}
    base.update(over)
    return load_train_config("maskable_ppo_set", "tiny", base)


@pytest.mark.slow
def test_distillation_moves_the_policy_towards_the_labels(tmp_path):
    import torch as th

    from aryl_gym.train.runner import build_model, make_vec_env
    from aryl_gym.train.teacher import TeacherMaskablePPO

    cfg = _teacher_cfg(hyperparams={**dict(load_train_config("maskable_ppo_set", "tiny").hyperparams),
                                    "learning_rate": 0.0})  # no RL step: only distillation moves it
    venv = make_vec_env(cfg)
    model = build_model(cfg, venv)
    assert isinstance(model, TeacherMaskablePPO)
    from stable_baselines3.common.logger import configure

    model.set_logger(configure(str(tmp_path), []))
    model._setup_learn(1024, None)
    from stable_baselines3.common.callbacks import CallbackList

    cb = CallbackList([])
    cb.init_callback(model)
    model.collect_rollouts(model.env, cb, model.rollout_buffer, model.n_steps)
    buf = model.rollout_buffer
    labels = model._teacher_labels
    assert labels is not None and (labels != NO_LABEL).all()
    # aligned: every label is allowed by the mask stored with its state
    masks = buf.action_masks.reshape(labels.shape + (-1,)).astype(bool)
    assert np.take_along_axis(masks, labels[..., None], axis=2).all()

    obs = {k: v.reshape(-1, *v.shape[2:]).copy() for k, v in buf.observations.items()}

    def nll() -> float:
        ot = model.policy.obs_to_tensor(obs)[0]
        with th.no_grad():
            _, logp, _ = model.policy.evaluate_actions(
                ot, th.as_tensor(labels.reshape(-1)), action_masks=masks.reshape(-1, masks.shape[-1]))
        return float(-logp.mean())

    before = nll()
    model.train()  # PPO's update (learning rate 0) then the distillation passes
    after = nll()
    assert after < 0.8 * before, (before, after)


@pytest.mark.slow
def test_teacher_weight_decays_and_saved_models_are_plain_maskable_ppo(tmp_path):
    from sb3_contrib import MaskablePPO

    from aryl_gym.train.runner import train

    seen: list[str] = []
    res = train(_teacher_cfg(teacher={"policy": "aryl", "coef": 2.0, "decay_steps": 2048},
                             bc={"policy": "aryl", "episodes": 1, "epochs": 1},
                             total_timesteps=3072),
                out=tmp_path / "runs", verbose=0, progress=seen.append)
    model = MaskablePPO.load(res.model_path, device="cpu")
    assert type(model) is MaskablePPO
    from aryl_gym.train.teacher import TeacherMaskablePPO

    t = TeacherMaskablePPO.load(res.model_path, device="cpu")
    t.teacher_kwargs = {"coef": 2.0, "decay_steps": 2048}
    t.num_timesteps = 0
    assert t.teacher_coef() == 2.0
    t.num_timesteps = 1024
    assert t.teacher_coef() == 1.0
    t.num_timesteps = 4096
    assert t.teacher_coef() == 0.0
    import csv

    with open(res.run_dir / "tb" / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    coefs = [float(r["teacher/coef"]) for r in rows if r.get("teacher/coef") not in (None, "")]
    assert coefs and coefs == sorted(coefs, reverse=True) and coefs[0] < 2.0
    assert any(r.get("teacher/nll") not in (None, "") for r in rows)
    # once the weight reached 0 for good, the env stopped labelling (each label costs a decision)
    assert coefs[-1] == 0.0 and any(r.get("teacher/labelling") not in (None, "") for r in rows)
    # half of every distillation batch came from the run's own BC demonstrations
    assert (res.run_dir / "demos.npz").is_file()
    assert any(float(r.get("teacher/demo_rows") or 0) == 256 for r in rows)
    assert not any("no demonstrations" in m for m in seen)


def test_teacher_config_rules():
    with pytest.raises(ConfigError, match="teacher.policy: unknown policy 'nope'"):
        load_train_config("maskable_ppo_set", "tiny", {"teacher": {"policy": "nope"}})
    with pytest.raises(ConfigError, match="reference policy name"):
        load_train_config("maskable_ppo_set", "tiny", {"teacher": {"policy": "sjf-grant"}})
    with pytest.raises(ConfigError, match="action_mode: sequential"):
        load_train_config("maskable_ppo_set", "tiny", {
            "teacher": {"policy": "aryl"}, "env_kwargs": {"action_mode": "targets"}})
    with pytest.raises(ConfigError, match="coef"):
        load_train_config("maskable_ppo_set", "tiny", {"teacher": {"policy": "aryl", "coef": -1}})
    with pytest.raises(ConfigError, match="algo: maskable_ppo"):
        load_train_config("ppo", "tiny", {"teacher": {"policy": "aryl"}})


@pytest.mark.slow
def test_dagger_phase_labels_argmax_states_and_scores_every_round(tmp_path):
    """The DAgger phase after RL: each round's file holds the student's greedy states with the
    demonstrator's labels (allowed by their masks), the aggregate grows by every round, every
    round is a row of eval.csv and summary.json, and the final model still loads."""
    import csv
    import json

    from sb3_contrib import MaskablePPO

    from aryl_gym.train.runner import train

    seen: list[str] = []
    res = train(_teacher_cfg(teacher={"policy": None}, total_timesteps=1024,
                             bc={"policy": "aryl", "episodes": 1, "epochs": 1},
                             eval={"freq": 1024, "seeds": [1000], "references": ["aryl"]},
                             dagger={"rounds": 2, "episodes": 1, "epochs": 1, "policy": "aryl-preempt"}),
                out=tmp_path / "runs", verbose=0, progress=seen.append)
    d = res.run_dir / "dagger"
    r0, r1 = np.load(d / "round0.npz"), np.load(d / "round1.npz")
    demos = np.load(res.run_dir / "demos.npz")
    agg = np.load(d / "aggregate.npz")
    assert len(agg["actions"]) == len(demos["actions"]) + len(r0["actions"]) + len(r1["actions"])
    assert "rewards" not in agg.files  # the demonstrator's returns are not mixed in
    for r in (r0, r1):
        labels, masks = r["actions"], r["masks"]
        assert len(labels) > 10 and masks[np.arange(len(labels)), labels].all()
    summary = json.loads((res.run_dir / "summary.json").read_text())
    assert [row["round"] for row in summary["dagger"]] == [1.0, 2.0]
    assert summary["trained_steps"] == 1024  # the RL phase's steps; DAgger's states come after
    assert summary["num_timesteps"] == 1024 + sum(row["collected"] for row in summary["dagger"])
    assert all(0.0 <= row["agreement"] <= 1.0 for row in summary["dagger"])
    steps = [float(r["timesteps"]) for r in csv.DictReader(open(res.run_dir / "eval.csv"))]
    assert steps[-2:] == [row["timesteps"] for row in summary["dagger"]] and steps == sorted(steps)
    assert any("dagger round 2/2" in m for m in seen)
    MaskablePPO.load(res.model_path, device="cpu")


def test_dagger_config_rules():
    with pytest.raises(ConfigError, match="dagger needs a reference policy"):
        load_train_config("maskable_ppo_set", "tiny", {"dagger": {"rounds": 1}, "bc": {"policy": None}})
    with pytest.raises(ConfigError, match="dagger.policy: unknown policy"):
        load_train_config("maskable_ppo_set", "tiny", {"dagger": {"rounds": 1, "policy": "nope"}})
    with pytest.raises(ConfigError, match="action_mode: sequential"):
        load_train_config("maskable_ppo_set", "tiny", {
            "dagger": {"rounds": 1, "policy": "aryl"}, "env_kwargs": {"action_mode": "targets"}})
    with pytest.raises(ConfigError, match="rounds"):
        load_train_config("maskable_ppo_set", "tiny", {"dagger": {"rounds": -1}})
    with pytest.raises(ConfigError, match="normalize_obs"):
        load_train_config("maskable_ppo_set", "tiny", {"dagger": {"rounds": 1}, "normalize_obs": True})


@pytest.mark.slow
def test_dagger_after_init_from_aggregates_the_configured_demos(tmp_path):
    """init_from skips behaviour cloning; the DAgger aggregate then starts from bc.demos."""
    from aryl_gym.train.bc import record_demos
    from aryl_gym.train.runner import train

    base = _teacher_cfg(teacher={"policy": None}, total_timesteps=0, eval={"freq": 0})
    first = train(base, out=tmp_path / "a", verbose=0)
    demos = tmp_path / "demos.npz"
    record_demos(base, "aryl", 1, 100, demos)
    cfg = _teacher_cfg(teacher={"policy": None}, total_timesteps=0, eval={"freq": 0},
                       init_from=str(first.model_path), bc={"demos": str(demos)},
                       dagger={"rounds": 1, "episodes": 1, "epochs": 1, "policy": "aryl"})
    res = train(cfg, out=tmp_path / "b", verbose=0)
    agg = np.load(res.run_dir / "dagger" / "aggregate.npz")
    r0 = np.load(res.run_dir / "dagger" / "round0.npz")
    assert len(agg["actions"]) == len(np.load(demos)["actions"]) + len(r0["actions"])


def test_dagger_worlds_merge_into_the_training_worlds_and_drop_reward_wrappers():
    """dagger.worlds replaces the training worlds key by key (the rest stay), is checked like
    them, and the rollout env draws its worlds from the merged ranges without reward wrappers."""
    from aryl_gym.train.config import dagger_worlds
    from aryl_gym.train.dagger import rollout_config
    from aryl_gym.train.envs import make_single_env
    from aryl_gym.train.paired import TraceMeanJCTReward

    cfg = load_train_config("maskable_ppo_set", "testbed", {
        "dagger": {"rounds": 1, "worlds": {"load": [1.1, 1.4], "train_servers": [3]}}})
    assert dagger_worlds(cfg) == {"load": [1.1, 1.4], "train_servers": [3],
                                  "elastic_fraction": list(cfg.worlds["elastic_fraction"])}
    assert cfg.worlds["load"] == [0.8, 1.4]  # the RL phase's worlds are untouched
    rc = rollout_config(cfg)
    assert rc.worlds == dagger_worlds(cfg) and rc.reward_reference is None and rc.pair_baseline == "none"
    env = make_single_env(rc)
    try:
        e = env
        while hasattr(e, "env"):  # no reward wrapper between the masker and the world sampler
            assert not isinstance(e, TraceMeanJCTReward)
            e = e.env
        for s in range(20_000, 20_006):
            _, info = env.reset(seed=s, options={"episode_seed": s})
            assert 1.1 <= info["world"]["load"] <= 1.4 and info["world"]["train_servers"] == 3
    finally:
        env.close()
    # no dagger.worlds (the config's default section): the rollouts use the training worlds
    plain = load_train_config("maskable_ppo_set", "basic", {"dagger": {"rounds": 1, "policy": "aryl"}})
    assert plain.dagger.worlds == {} and plain.worlds and dagger_worlds(plain) == dict(plain.worlds)
    with pytest.raises(ConfigError, match=r"dagger.worlds .*unknown key 'lod'"):
        load_train_config("maskable_ppo_set", "testbed", {"dagger": {"rounds": 1, "worlds": {"lod": [1, 2]}}})
    with pytest.raises(ConfigError, match=r"dagger.worlds .*load"):
        load_train_config("maskable_ppo_set", "testbed", {"dagger": {"rounds": 1, "worlds": {"load": [1.4, 1.1]}}})
    with pytest.raises(ConfigError, match="keep"):
        load_train_config("maskable_ppo_set", "testbed", {"dagger": {"rounds": 1, "keep": "first"}})


@pytest.mark.slow
def test_dagger_keep_last_makes_the_last_round_the_best_model(tmp_path):
    """keep: last: the last round becomes best_model.zip when its evaluation finishes every job,
    whatever its avg JCT (the rounds target failures the evaluation seeds rarely show)."""
    import torch as th
    from sb3_contrib import MaskablePPO

    from aryl_gym.train.runner import train

    seen: list[str] = []
    res = train(_teacher_cfg(teacher={"policy": None}, total_timesteps=1024,
                             bc={"policy": "aryl", "episodes": 1, "epochs": 1},
                             eval={"freq": 1024, "seeds": [1000], "references": ["aryl"]},
                             dagger={"rounds": 1, "episodes": 1, "epochs": 1, "policy": "aryl-preempt",
                                     "keep": "last"}),
                out=tmp_path / "runs", verbose=0, progress=seen.append)
    best = MaskablePPO.load(res.run_dir / "best_model.zip", device="cpu").policy.state_dict()
    last = MaskablePPO.load(res.run_dir / "dagger" / "model_round0.zip", device="cpu").policy.state_dict()
    assert best.keys() == last.keys() and all(th.equal(best[k], last[k]) for k in best)
    assert any("the last round is best_model.zip" in m for m in seen)
    rl = MaskablePPO.load(res.run_dir / "best_model_rl.zip", device="cpu").policy.state_dict()
    assert any(not th.equal(rl[k], last[k]) for k in rl)  # the RL phase's best is kept apart
    # a round's model loads with its run's config (the env it expects), like a checkpoint
    from aryl_gym.agents.learned import load_agent

    env = load_agent(res.run_dir / "dagger" / "model_round0.zip").make_env()
    env.close()


@pytest.mark.slow
def test_zero_steps_from_init_from_still_evaluates_and_runs_dagger(tmp_path):
    """total_timesteps 0 with init_from (only the DAgger phase): the evaluation callback is set
    up although learn() never runs; the start and the round are rows of eval.csv."""
    import csv

    from aryl_gym.train.runner import train

    base = _teacher_cfg(teacher={"policy": None}, total_timesteps=0, eval={"freq": 0})
    first = train(base, out=tmp_path / "a", verbose=0)
    cfg = _teacher_cfg(teacher={"policy": None}, total_timesteps=0, init_from=str(first.model_path),
                       eval={"freq": 1024, "seeds": [1000], "references": ["aryl"], "background": True},
                       dagger={"rounds": 1, "episodes": 1, "epochs": 1, "policy": "aryl"})
    res = train(cfg, out=tmp_path / "b", verbose=0)
    rows = list(csv.DictReader(open(res.run_dir / "eval.csv")))
    assert len(rows) == 2 and float(rows[0]["timesteps"]) == 0.0 and float(rows[1]["timesteps"]) > 0
